"""The committed leaderboard (`benchmarks/results/leaderboard/`) is reproduced: episodes
of every agent on every env are played again from `configs/bench/leaderboard.yaml` and
must give the committed lines bit for bit, but for timings and version stamps; and the
leaderboard written from the committed results is the one committed."""

from pathlib import Path

import pytest

from argus_env.bench import load_config
from argus_env.bench import results as R
from argus_env.bench.config import Episode
from argus_env.bench.runner import Runner

ROOT = Path(__file__).resolve().parents[2]
BOARD = ROOT / "benchmarks" / "results" / "leaderboard"
RESULTS = BOARD / "leaderboard.jsonl"
#: fields that differ between identical runs (when, how long) or name the code versions
#: (compared by what they produce: every other field)
VOLATILE = set(R.TIMING_FIELDS) | {"versions", "hashes"}


def committed() -> list[dict]:
    return R.read_lines(RESULTS)


def replayed(line: dict) -> dict:
    cfg = load_config("leaderboard")
    ep = Episode(line["agent"], line["env_id"], line["track"], line["shape"], int(line["seed"]))
    return Runner(cfg, out_dir=ROOT / "results").play(ep)


#: fields a re-run writes that lines committed before them lack
ADDED = ("earlier_actions", "estimator", "catalog", "model_anchor")


def same(a: dict, b: dict) -> list[str]:
    """The fields where committed line `a` and re-run `b` differ; a field `a` predates is
    held to what `a` implies (its earlier episodes' actions: `a`'s env steps less its own)."""
    keys = (set(a) | set(b)) - VOLATILE - {k for k in ADDED if k not in a}
    out = sorted(k for k in keys if a.get(k) != b.get(k) and k != "agent_args")
    if not same_args(a, b):
        out.append("agent_args")
    if "earlier_actions" not in a and \
            a["env_steps"] != len(a["actions"]) + sum(map(len, b.get("earlier_actions", []))):
        out.append("earlier_actions")
    if "estimator" not in a and R.line_setting(a, "estimator") != b.get("estimator"):
        out.append("estimator")   # a line made before the field: priced by the analytic model
    if "catalog" not in a and R.line_setting(a, "catalog") != b.get("catalog"):
        out.append("catalog")     # a line made before catalogs had versions: the first
    if "model_anchor" not in a and R.line_setting(a, "model_anchor") != b.get("model_anchor"):
        out.append("model_anchor")   # a line made before the field: the roofline's anchor
    return out


def same_args(a: dict, b: dict) -> bool:
    """The agent's `Args` as committed in `a`; a field added to them since (evolutionary's
    `size_from_budget`, say) may appear in re-run `b`, at its default, which is what the
    committed episode ran with."""
    import dataclasses
    old, new = a.get("agent_args", {}), b.get("agent_args", {})
    if set(old) - set(new) or any(new[k] != v for k, v in old.items()):
        return False
    module = load_config("leaderboard").agent_module(a["agent"])
    defaults = {f.name: f.default for f in dataclasses.fields(module.Args)}
    return all(k in defaults and new[k] == defaults[k] for k in set(new) - set(old))


def test_the_committed_suite_is_complete_and_of_one_setting():
    cfg = load_config("leaderboard")
    lines = committed()
    want = {e.key for e in cfg.episodes()}
    have = {R.line_key(ln) for ln in lines}
    assert have == want, (sorted(want - have)[:5], sorted(have - want)[:5])
    assert len(cfg.seeds) >= 3 and {"random", "greedy", "evolutionary", "ppo", "llm"} <= set(cfg.agents)
    from argus_env.envs import ENV_IDS
    assert {ln["env_id"] for ln in lines} == set(ENV_IDS), "every registered env is on the board"
    assert all(ln["measure"] == "table" and ln["budget"] == cfg.budget for ln in lines)


def test_every_committed_line_names_the_table_rows_its_suite_pins():
    """The board replays against the H200 table rows it was played against, not the
    tables as they grow: every line names them (`hashes.table_rows`), and the suite pins
    the same rows (`tables:`), so a re-run reads what the lines read."""
    cfg = load_config("leaderboard")
    for ln in committed():
        assert ln["hashes"].get("table_rows") == cfg.tables_for(ln["env_id"]), \
            (R.line_key(ln), ln["hashes"].get("table_rows"))


def _first(agent: str, env_id: str | None = None) -> list[dict]:
    """The first committed episode of `agent` on each env (or on `env_id`)."""
    seen, out = set(), []
    for ln in committed():
        if ln["agent"] == agent and ln["env_id"] not in seen and env_id in (None, ln["env_id"]):
            seen.add(ln["env_id"])
            out.append(ln)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["random", "greedy", "evolutionary", "ppo"])
def test_episodes_of_each_agent_on_each_env_replay_bit_for_bit(agent):
    lines = _first(agent)
    assert lines, f"no committed {agent} episodes"
    for line in lines:
        again = replayed(line)
        assert same(line, again) == [], (line["env_id"], line["shape"], same(line, again))


#: timings inside an LLM transcript entry
TRANSCRIPT_TIMINGS = ("model_seconds", "env_seconds")


#: how far a candidate's log-likelihood may move between CPUs: the model's float32 sums
#: take another order under another instruction set (AVX2 against AVX-512 moved scores by
#: up to 1e-4 here, and by 1e-2 on another machine's CPU)
SCORE_TOLERANCE = 0.02


def _untimed(transcript: list) -> list:
    """Entries without their timings, and without their scores (compared apart)."""
    return [{k: v for k, v in t.items() if k not in (*TRANSCRIPT_TIMINGS, "scores")}
            for t in transcript]


def _score_gaps(a: list, b: list) -> list[str]:
    """Where two transcripts' scores differ in the candidates or beyond the tolerance."""
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        sx, sy = x.get("scores") or [], y.get("scores") or []
        if [c for c, _ in sx] != [c for c, _ in sy]:
            out.append(f"entry {i}: candidates {sx} vs {sy}")
        elif any(abs(u - v) > SCORE_TOLERANCE for (_, u), (_, v) in zip(sx, sy)):
            out.append(f"entry {i}: scores {sx} vs {sy}")
    return out


@pytest.mark.slow
def test_an_llm_planner_episode_replays_bit_for_bit():
    """The planner samples among the legal actions, scored by SmolLM2 on the CPU, with the
    episode's seed: the episode comes out the same (actions, rewards, figures exactly), its
    transcript too (prompts and answers exactly) but for the transcript's own timings and
    the candidates' scores, which are equal to `SCORE_TOLERANCE`: floating point in the
    model is not bit-for-bit across CPUs."""
    # RMSNorm's catalog offers the fewest legal actions, so its episode scores the fewest
    # candidates with the model (the GEMM one took about twice as long)
    line = _first("llm", "Argus-RMSNorm-v0")[0]
    again = replayed(line)
    assert same(line, again) in ([], ["transcript"]), same(line, again)
    assert _untimed(line["transcript"]) == _untimed(again["transcript"])
    assert _score_gaps(line["transcript"], again["transcript"]) == []


def test_the_committed_board_is_the_one_its_results_give():
    """`argus leaderboard benchmarks/results/leaderboard/leaderboard.jsonl --out-dir
    benchmarks/results/leaderboard` wrote the committed Markdown (joined with the live
    figures beside the results, when there are any)."""
    from argus_env.bench.leaderboard import build
    from argus_env.bench.render import markdown
    live = R.live_beside([RESULTS])
    text = markdown(build(committed(), live=live), [str(RESULTS.relative_to(ROOT))])
    assert text.strip() == (BOARD / "leaderboard.md").read_text().strip()
