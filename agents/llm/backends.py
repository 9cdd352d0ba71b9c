"""Language-model backends for the planner: a local transformers causal LM and an
OpenAI-compatible HTTP endpoint.

Both take chat messages (`[{"role": "system" | "user" | "assistant", "content": str}]`).
`generate(messages, max_new_tokens)` returns the answer text. The local backend also
`score`s candidate answers by their log-likelihood under the model, which is how the
planner's `scoring` mode ranks the legal actions (one forward pass over the prompt, then
the candidates in batches over a copy of its key/value cache).

    backend = make_backend("smollm2")                                  # the shipped gguf
    backend = make_backend("/models/Qwen2.5-7B-Instruct")              # any HF folder
    backend = make_backend("/models/x.Q4_K_M.gguf")                    # any gguf file
    backend = make_backend("qwen", base_url="http://127.0.0.1:8000/v1")  # any server

transformers and torch are imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import copy
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .models import MODELS, dequantized_dir, ensure_local_model


class BackendError(RuntimeError):
    """The model could not answer (load failure, HTTP error, prompt too long)."""


# ---------------------------------------------------------------- local transformers
def resolve_model(model: str) -> tuple[Path, str | None]:
    """(folder, gguf file name or None) for a model name from `models.MODELS`, a gguf
    file, a folder holding one gguf file, or a Hugging Face model folder."""
    if model in MODELS:
        model = str(ensure_local_model(model))
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path.parent, path.name
    if path.is_dir():
        if (path / "config.json").exists():
            return path, None
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return path, ggufs[0].name
        if ggufs:
            raise BackendError(f"{path} holds {len(ggufs)} gguf files; name one of them")
    raise BackendError(f"model {model!r} is neither a known name ({', '.join(MODELS)}), a .gguf "
                       "file, nor a folder with config.json or one .gguf file")


class TransformersBackend:
    """A local causal LM run with transformers on CPU (or `device`).

    Greedy when `temperature` is 0, else sampled with a seeded generator. A gguf model is
    de-quantized once and cached as safetensors (see `models.dequantized_dir`).
    """

    def __init__(self, model: str = "smollm2", temperature: float = 0.0, seed: int = 0,
                 max_new_tokens: int = 48, device: str = "cpu", threads: int | None = None,
                 score_batch: int = 8):
        import torch
        if threads:
            torch.set_num_threads(threads)
        self.temperature, self.seed, self.max_new_tokens = temperature, seed, max_new_tokens
        self.device, self.score_batch = device, score_batch
        self.calls = 0
        folder, gguf = resolve_model(model)
        self.name = f"{folder.name}/{gguf}" if gguf else folder.name
        self.tok, self.model = _load(folder, gguf)
        self.model.to(device).eval()
        self.max_context = int(getattr(self.model.config, "max_position_embeddings", 2048) or 2048)
        eos = self.tok.eos_token_id
        self.end_ids = [eos] if isinstance(eos, int) else list(eos or [])[:1]

    # ------------------------------------------------------------ prompts
    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """Token ids of the chat prompt, ending where the assistant's answer begins."""
        if getattr(self.tok, "chat_template", None):
            enc = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                               return_dict=True)
            ids = enc["input_ids"] if hasattr(enc, "keys") else enc
        else:
            text = "\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages) + "\nAssistant:"
            ids = self.tok(text)["input_ids"]
        ids = list(ids[0] if ids and isinstance(ids[0], list) else ids)
        return ids

    def count_tokens(self, text: str) -> int:
        return len(self.tok(text, add_special_tokens=False)["input_ids"])

    def _check_length(self, n: int, extra: int) -> None:
        if n + extra > self.max_context:
            raise BackendError(f"prompt of {n} tokens + {extra} more exceeds the model's "
                               f"context of {self.max_context}")

    # ------------------------------------------------------------ generation
    def generate(self, messages: list[dict], max_new_tokens: int | None = None) -> str:
        import torch
        budget = int(max_new_tokens or self.max_new_tokens)
        ids = self.prompt_ids(messages)
        self._check_length(len(ids), budget)
        x = torch.tensor([ids], device=self.device)
        kwargs = dict(max_new_tokens=budget, pad_token_id=(self.end_ids or [0])[0],
                      attention_mask=torch.ones_like(x))
        if self.temperature > 0:
            torch.manual_seed(self.seed * 100_003 + self.calls)
            kwargs.update(do_sample=True, temperature=self.temperature, top_p=0.95)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        self.calls += 1
        with torch.no_grad():
            out = self.model.generate(x, **kwargs)
        return self.tok.decode(out[0, len(ids):], skip_special_tokens=True)

    # ------------------------------------------------------------ scoring
    def score(self, messages: list[dict], candidates: list[str], normalize: str = "mean") -> list[float]:
        """Log-likelihood of each candidate as the whole answer (its tokens and the
        end-of-turn token), per token (`mean`) or summed (`sum`)."""
        import torch
        if not candidates:
            return []
        prompt = self.prompt_ids(messages)
        cands = [self.tok(c, add_special_tokens=False)["input_ids"] + self.end_ids for c in candidates]
        self._check_length(len(prompt), max(len(c) for c in cands))
        self.calls += 1
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([prompt], device=self.device), use_cache=True)
            first = torch.log_softmax(out.logits[0, -1].float(), -1)
            cache = out.past_key_values
            totals: list[float] = []
            for lo in range(0, len(cands), self.score_batch):
                totals += self._score_batch(cache, len(prompt), first, cands[lo:lo + self.score_batch])
        if normalize == "sum":
            return totals
        return [t / len(c) for t, c in zip(totals, cands)]

    def _score_batch(self, cache, n_prompt: int, first, cands: list[list[int]]) -> list[float]:
        import torch
        width = max(len(c) for c in cands)
        pad = (self.end_ids or [0])[0]
        x = torch.tensor([c + [pad] * (width - len(c)) for c in cands], device=self.device)
        mask = torch.ones(len(cands), n_prompt + width, dtype=torch.long, device=self.device)
        for i, c in enumerate(cands):
            mask[i, n_prompt + len(c):] = 0
        batch_cache = copy.deepcopy(cache)
        batch_cache.batch_repeat_interleave(len(cands))
        out = self.model(input_ids=x, attention_mask=mask, past_key_values=batch_cache, use_cache=True)
        logp = torch.log_softmax(out.logits.float(), -1)
        totals = []
        for i, c in enumerate(cands):
            total = float(first[c[0]])
            for j in range(1, len(c)):
                total += float(logp[i, j - 1, c[j]])
            totals.append(total)
        return totals


def _load(folder: Path, gguf: str | None):
    """Tokenizer and model; a gguf goes through its de-quantized safetensors copy."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    transformers.logging.set_verbosity_error()
    if gguf is None:
        return AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)
    saved = dequantized_dir(folder / gguf)
    if (saved / "config.json").exists():
        try:
            return AutoTokenizer.from_pretrained(saved), AutoModelForCausalLM.from_pretrained(saved)
        except (OSError, ValueError):
            pass  # a damaged copy: load the gguf again and rewrite it
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf)
    except ImportError as e:
        raise BackendError(f"loading {gguf} needs the `gguf` and `accelerate` packages "
                           f"(pip install 'argus-env[llm]'): {e}") from None
    _save_dequantized(tok, model, saved)
    return tok, model


def _save_dequantized(tok, model, saved: Path) -> None:
    """Save the de-quantized weights (best effort, atomically: temp folder + rename)."""
    import shutil
    import tempfile
    tmp = None
    try:
        saved.parent.mkdir(parents=True, exist_ok=True)
        model.hf_quantizer = None  # the weights are plain floats now
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
        tmp = tempfile.mkdtemp(dir=saved.parent, prefix=".save-")
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if saved.exists():
            shutil.rmtree(saved, ignore_errors=True)
        os.replace(tmp, saved)
        tmp = None
    except (OSError, ValueError, RuntimeError, AttributeError):
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- OpenAI-compatible HTTP
class OpenAIBackend:
    """A server speaking the OpenAI chat completions API (vLLM, llama.cpp's server, SGLang,
    `agents.llm.serve`, the OpenAI API itself), through the standard library only.

    `base_url` ends in `/v1`; the API key, if the server needs one, is read from the
    environment variable `api_key_env` (never stored in configs or records)."""

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float = 0.0, max_new_tokens: int = 256, timeout: float = 120.0,
                 seed: int | None = None):
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BackendError(f"base_url must be http(s)://host[:port]/v1, got {base_url!r}")
        self.base_url, self.model, self.api_key_env = base_url.rstrip("/"), model, api_key_env
        self.temperature, self.max_new_tokens, self.timeout, self.seed = (
            temperature, max_new_tokens, timeout, seed)
        self.name = f"{model}@{self.base_url}"
        local = parsed.hostname in ("127.0.0.1", "localhost", "::1")
        self._opener = urllib.request.build_opener(
            *([urllib.request.ProxyHandler({})] if local else []))

    def generate(self, messages: list[dict], max_new_tokens: int | None = None) -> str:
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": int(max_new_tokens or self.max_new_tokens)}
        if self.seed is not None:
            body["seed"] = self.seed
        data = self._post("/chat/completions", body)
        try:
            return data["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise BackendError(f"unexpected response shape: {json.dumps(data)[:300]}") from None

    def _post(self, route: str, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.base_url + route, data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300]
            raise BackendError(f"{self.base_url}{route}: HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise BackendError(f"cannot reach {self.base_url}{route}: {e}") from None
        except json.JSONDecodeError as e:
            raise BackendError(f"{self.base_url}{route}: response is not JSON: {e}") from None


class ScriptedBackend:
    """Answers from a script, then `default`; records every prompt. For tests and dry runs
    of the planner's parsing and control flow without a model."""

    name = "scripted"

    def __init__(self, answers=(), default: str = "submit()"):
        self.answers, self.default, self.prompts = list(answers), default, []

    def generate(self, messages: list[dict], max_new_tokens: int | None = None) -> str:
        self.prompts.append(messages)
        return self.answers.pop(0) if self.answers else self.default


def make_backend(model: str = "smollm2", base_url: str | None = None, **kwargs):
    """An OpenAI-compatible backend when `base_url` is given, else a local model."""
    if base_url:
        keep = {k: v for k, v in kwargs.items()
                if k in ("api_key_env", "temperature", "max_new_tokens", "timeout", "seed")}
        return OpenAIBackend(base_url, model, **keep)
    keep = {k: v for k, v in kwargs.items()
            if k in ("temperature", "seed", "max_new_tokens", "device", "threads", "score_batch")}
    return TransformersBackend(model, **keep)
