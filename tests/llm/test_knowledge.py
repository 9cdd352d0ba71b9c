"""The knowledge base: curated entries that name real invariants and transformations,
retrieved by embeddings (slow: loads all-MiniLM-L6-v2) or BM25."""

import pytest

from argus_env.agents.knowledge import load_entries, parse_entry
from argus_env.agents.knowledge.retrieve import Retriever, tokenize
from argus_env.check.pack import known_classes
from argus_env.task import get_task
from argus_env.tasks.gemm.space import TRANSFORMS

TOPICS = ["tiling-wave-quantization", "software-pipelining", "swizzled-program-ids", "split-k",
          "split-k-combine", "stream-k", "tma", "warp-specialization", "persistent-kernels",
          "epilogue-subtiling", "epilogue-fusion", "kmajor-operands", "occupancy-registers",
          "small-m-decode", "online-softmax", "causal-block-skipping", "exp2-folding",
          "gqa-packing", "moe-token-alignment", "grouped-gemm-scheduling", "fused-swiglu",
          "atomics-precision", "l2-reuse"]


def test_entries_are_curated_and_name_real_invariants_and_transforms():
    tasks = [get_task(name) for name in ("gemm", "attention", "moe")]  # their packs
    entries = load_entries()                                            # declare the classes
    assert len(entries) >= 30, len(entries)
    names = {t.name for t in TRANSFORMS} | {"undo", "submit"}
    names |= {n for task in tasks for n, _ in task.space.catalog()}    # each task's own
    ids = {e.id for e in entries}
    assert not set(TOPICS) - ids, f"missing topics: {sorted(set(TOPICS) - ids)}"
    for e in entries:
        assert set(e.invariants) <= set(known_classes()), (e.id, e.invariants)
        assert set(e.transforms) <= names, (e.id, e.transforms)
        for section in ("## When it helps", "## What it costs", "## Invariants", "## In Argus"):
            assert section in e.body, f"{e.id} lacks {section!r}"
        assert 20 < len(e.hint) < 400, (e.id, e.hint)
    split = next(e for e in entries if e.id == "split-k")
    assert {"split_k", "combine"} <= set(split.transforms)
    assert {"coverage", "exactly_once"} <= set(split.invariants)


def test_a_malformed_entry_is_a_clear_error():
    with pytest.raises(ValueError, match="front matter"):
        parse_entry("no front matter here", "x.md")
    with pytest.raises(ValueError, match="lacks title, hint"):
        parse_entry("---\nid: x\n---\nbody", "x.md")
    with pytest.raises(ValueError, match="not valid YAML"):
        parse_entry("---\nid: x\ntitle: a: b: c\n---\nbody", "x.md")


def test_tokenize_splits_snake_case():
    assert tokenize("split_k(4) then the combine") == ["split_k", "split", "k", "4", "then", "combine"]


def test_bm25_returns_split_k_for_a_split_k_coverage_violation(splitk_report):
    assert "[coverage]" in splitk_report and "pid_k" in splitk_report, splitk_report
    hits = Retriever(method="bm25").search(splitk_report, k=3, task="gemm")
    assert hits[0].entry.id == "split-k", [(h.entry.id, h.score) for h in hits]


def test_auto_falls_back_to_bm25_when_the_embedder_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_MODEL_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("ARGUS_NO_DOWNLOAD", "1")
    import argus_env.agents.knowledge.retrieve as R
    monkeypatch.setattr(R, "_EMBEDDERS", {})
    monkeypatch.setattr("argus_env.agents.llm.models.installed_path", lambda spec: None)
    r = Retriever(method="auto")
    assert r.method == "bm25" and "not available" in r.fallback_reason, r.fallback_reason
    assert r.search("split-K partial sums uncombined", k=1)[0].entry.id.startswith("split-k")
    with pytest.raises(Exception, match="not available"):
        Retriever(method="embedding")


@pytest.mark.slow
def test_embedding_retrieval_returns_split_k_for_a_split_k_coverage_violation(splitk_report):
    r = Retriever(method="embedding")
    hits = r.search(splitk_report, k=3, task="gemm")
    assert r.method == "embedding"
    assert hits[0].entry.id == "split-k", [(h.entry.id, round(h.score, 3)) for h in hits]
    assert "coverage" in hits[0].entry.invariants
    # and a decode shape without violations retrieves the decode advice among the top 3
    hits = r.search("decode-16 M=16, N=4096, K=4096 (decode, small M, memory bound) "
                    "Program: GEMM: 64x64x32 tiles, 4 warps.", k=3, task="gemm")
    assert "small-m-decode" in [h.entry.id for h in hits], [h.entry.id for h in hits]


# ------------------------------------------------------------ plans and repairs
def test_every_plan_and_repair_names_real_catalog_calls_and_valid_expressions():
    from argus_env.agents.knowledge.conditions import parse
    from argus_env.task import get_task
    entries = load_entries()
    plans = [(e, p) for e in entries for p in e.plans]
    repairs = [(e, r) for e in entries for r in e.repairs]
    assert len(plans) >= 10 and len(repairs) >= 3, (len(plans), len(repairs))
    for e, p in plans:
        assert p.tasks, e.id
        for task in p.tasks:
            space = get_task(task).space
            for call in p.actions:
                parsed = space.parse_call(call)          # raises on a name the catalog lacks
                assert parsed.kind == "transform", (e.id, call)
        parse(p.when), parse(p.expect)
    for e, r in repairs:
        assert r.invariant in known_classes(), (e.id, r)
        for task in e.tasks:
            for call in r.actions:
                get_task(task).space.parse_call(call)


def test_the_split_k_repair_matches_the_checkers_real_message(splitk_report):
    from argus_env.agents.knowledge import get_entry
    repairs = get_entry("split-k-combine").repairs
    for r in repairs:
        assert f"[{r.invariant}]" in splitk_report and r.match in splitk_report, (r, splitk_report)
        assert r.actions == ("combine('atomic')",)


def test_conditions_are_read_not_run():
    from argus_env.agents.knowledge.conditions import evaluate, holds
    names = {"M": 16, "N": 4096, "K": 4096, "tile_m": 64, "tile_n": 64, "sms": 132}
    assert evaluate("cdiv(M, tile_m) * cdiv(N, tile_n)", names) == 64
    assert holds("cdiv(M, tile_m) * cdiv(N, tile_n) < sms and K >= 1024", names)
    assert evaluate("wave_eff(133, sms)", names) == pytest.approx(133 / 264)
    assert not holds("attention_heads > 2", names)          # unknown here: does not apply
    for bad in ("__import__('os')", "M.real", "open('x')", "[1][0]", "'a' < 'b'", "2 ** 99999",
                "lambda: 1", "M if True else N"):
        with pytest.raises((ValueError, SyntaxError)):
            evaluate(bad, names)
