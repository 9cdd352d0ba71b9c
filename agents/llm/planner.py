"""The in-context LLM planner: a language model chooses each transformation, reading the
checker's report, retrieved GPU-optimization knowledge and its own memory of earlier
episodes.

Each step builds a prompt from the observation (program, invariant report with
counterexamples, performance), a short task card, the knowledge entries retrieved for
the current report and shape (`agents/knowledge`), and lessons from earlier episodes
(`memory.py`). Then, by `mode`:

- `scoring` (default; right for small models): every untried legal action is scored by
  the model's log-likelihood as the answer to the prompt, and the best one is taken.
  Always a valid action; no generation.
- `free`: the model writes an answer; `parse.py` extracts one transformation call or a
  fenced DSL program. Anything else (empty, over-long, unparseable, hostile, illegal)
  becomes an error in the transcript and a fallback action; it is never executed.

Around the model, a thin search shell (like the greedy baseline's) keeps the episode
useful within the budget: actions already tried from the same program are not offered
again; a measured regression is undone; violations get `fix_steps` steps to be fixed
before the shell undoes back to the last clean program; near the end of the budget it
returns to the best program seen and submits. Every prompt and answer is saved in the
episode record's `transcript`. Works with text and discrete environments (calls are
mapped to catalog indices); programs need `mode="text"`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from argus_env.envs.record import EpisodeRecord, Recorder

from . import prompt as P
from .memory import Memory, StepRecord
from .parse import parse_answer


@dataclass
class Args:
    budget: int = 24
    """environment steps, the final undo/replay/submit steps included"""
    seed: int = 0
    """seeds the environment's reset, sampling and the fallback choices"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    model: str = "smollm2"
    """a model name (smollm2), a .gguf file, a Hugging Face folder, or the served model's
    name when base_url is set"""
    base_url: str | None = None
    """an OpenAI-compatible endpoint (http://host:port/v1); None runs the model locally"""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key, if it needs one"""
    mode: str = "scoring"
    """scoring: rank the legal actions by log-likelihood; free: generate and parse"""
    max_new_tokens: int = 48
    """generation budget per step (free mode)"""
    temperature: float = 0.0
    """0: greedy decoding (free) or the best-scored action (scoring); above 0: sampled
    (scoring mode samples an action from softmax(score / temperature))"""
    device: str = "cpu"
    """torch device of a local model (cpu, cuda)"""
    prompt_tokens: int = 640
    """token budget of the prompt; low-priority sections are dropped to fit"""
    program: str = "auto"
    """summary: the program's one-line summary; full: its DSL text; auto: full in free mode"""
    knowledge: bool = True
    """retrieve knowledge entries into the prompt"""
    knowledge_k: int = 2
    """entries per prompt"""
    retrieval: str = "auto"
    """embedding, bm25, or auto (embedding when the model is available)"""
    memory: bool = True
    """use episodic memory (lessons from earlier episodes) in the prompt"""
    report: bool = True
    """show the checker's report in the prompt; False leaves it out everywhere the prompt
    draws on it (its section, the retrieval query, the memory's choice of lessons), the
    ablation "without the checker's report" """
    memory_path: str = "auto"
    """JSON file of the memory; auto: $ARGUS_CACHE_DIR/llm/memory-<task>.json; none: in-process"""
    memory_k: int = 4
    """lessons per prompt"""
    contrast: float = 0.5
    """scoring mode: subtract this times each action's log-likelihood under the prompt
    without knowledge and memory (context-aware decoding: ranks actions by how much the
    retrieved context supports them, not by the model's prior; 0 turns it off)"""
    prior_weight: float = 0.0
    """scoring mode: add this times the memory's mean log-gain of an action to its score"""
    regress_tol: float = 0.01
    """the shell undoes a measured step that lowers throughput by more than this fraction"""
    fix_steps: int = 1
    """steps the model gets to fix violations before the shell undoes back"""
    auto_undo: bool = True
    """undo measured regressions and unfixed violations automatically"""
    allow_programs: bool = True
    """accept fenced DSL programs as actions (text environments)"""
    threads: int | None = None
    """torch CPU threads for a local model (None: torch's default)"""


@dataclass
class Decision:
    action: str                     # canonical call or DSL program text
    source: str                     # model | fallback | policy
    error: str | None = None        # why the model's answer was not used
    answer: str | None = None       # the raw answer (free mode)
    scores: list = field(default_factory=list)   # top candidates (scoring mode)


_BACKENDS: dict[tuple, object] = {}


def get_backend(args: Args):
    """The backend for `args`, loaded once per process and configuration."""
    from .backends import make_backend
    key = (args.model, args.base_url, args.api_key_env, args.temperature, args.seed,
           args.max_new_tokens, args.threads, args.device)
    if key not in _BACKENDS:
        _BACKENDS[key] = make_backend(args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                                      temperature=args.temperature, seed=args.seed,
                                      max_new_tokens=args.max_new_tokens, threads=args.threads,
                                      device=args.device)
    return _BACKENDS[key]


def default_memory_path(task: str) -> Path:
    root = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(Path.home(), ".cache", "argus")
    return Path(root) / "llm" / f"memory-{task}.json"


class Planner:
    """One episode of the planner in `env` (text or discrete mode)."""

    def __init__(self, env, args: Args, backend=None, retriever=None, memory: Memory | None = None,
                 progress=None):
        if args.mode not in ("scoring", "free"):
            raise ValueError(f"mode must be 'scoring' or 'free', got {args.mode!r}")
        self.env, self.args, self.progress = env, args, progress
        self.core = env.unwrapped
        self.text_mode = self.core.mode == "text"
        self.backend = backend if backend is not None else get_backend(args)
        self.retriever = retriever
        if args.knowledge and retriever is None:
            from argus_env.agents.knowledge.retrieve import Retriever
            self.retriever = Retriever(method=args.retrieval)
        if memory is None and args.memory:
            path = None if args.memory_path in ("none", "", None) else (
                default_memory_path(self.core.task.name) if args.memory_path == "auto" else args.memory_path)
            memory = Memory(path)
        self.memory = memory if args.memory else None
        self.rng = np.random.default_rng(args.seed)
        self.transcript: list[dict] = []
        self.tried: set[tuple[int, str]] = set()
        self.count = getattr(self.backend, "count_tokens", lambda t: len(t) // 4 + 1)

    # ------------------------------------------------------------ episode
    def run(self) -> EpisodeRecord:
        a = self.args
        self.obs, self.info = self.env.reset(seed=a.seed, options={"shape": a.shape} if a.shape else None)
        self.rec = Recorder(self.env, "llm", a.seed)
        self.rec.start(self.info)
        self.rec.rec.transcript = self.transcript
        self.path: list[str] = []              # the env's undo stack, as calls
        base = float(self.info["best_frac_anchor"])
        self.fracs = [base]                    # measured fraction after path[:i] (0: unmeasured)
        self.best = (base, [])                 # best measured fraction and its path
        self._improved_at = 0                  # path depth of the last improvement
        self.last = None
        if self.memory is not None:
            self.memory.begin(self.core.task.name, self.info["shape"], self.info["sizes"], base)
        done = False
        while not done and self.rec.rec.steps + 1 + self._reserve(extra=1) <= self.args.budget:
            decision = self.decide()
            if decision is None:
                break
            done = self.act(decision)
            if not done:
                done = self.police()
        if not done:
            self.finish()
        if self.memory is not None:
            self.memory.end(self.best[0], self.best[1])
        return self.rec.rec

    def _reserve(self, extra: int = 0) -> int:
        """Steps needed to go back to the best program and submit, with `extra` more
        actions on the current path."""
        common = _common_prefix(self.path, self.best[1])
        return (len(self.path) + extra - common) + (len(self.best[1]) - common) + 1

    # ------------------------------------------------------------ choosing
    def candidates(self) -> list[str]:
        legal = self.core.legal_actions()
        violated = bool(self.info["report"]["violations"])
        key = hash(self.info["program"])
        # a knob turned since the last improvement is not turned again (no plateau walks)
        plateau = {x.split("(")[0] for x in self.path[self._improved_at:]} if not violated else set()
        return [c for c in legal if c != "submit()" and (c != "undo()" or violated)
                and (key, c) not in self.tried and c.split("(")[0] not in plateau]

    def decide(self) -> Decision | None:
        cands = self.candidates()
        if not cands:
            return None
        messages, pinfo = self.build_prompt(cands)
        self._prompt_info = pinfo
        t0 = time.perf_counter()
        scoring = self.args.mode == "scoring" and hasattr(self.backend, "score")
        try:
            decision = self._by_scores(messages, cands) if scoring else self._by_answer(messages, cands)
        except Exception as e:  # a backend failure must not end the episode: fall back
            decision = Decision(self._fallback(cands), "fallback",
                                error=f"backend failed: {type(e).__name__}: {str(e)[:300]}")
        self._pending = {"prompt": messages, "prompt_info": pinfo,
                         "mode": "scoring" if scoring else "free",
                         "model_seconds": round(time.perf_counter() - t0, 3)}
        return decision

    def _by_scores(self, messages, cands) -> Decision:
        scores = np.array(self.backend.score(messages, cands), dtype=float)
        context = {"knowledge", "memory"} & set(self._prompt_info["sections"])
        if self.args.contrast and context:
            bare, _ = self.build_prompt(cands, without=context)
            scores -= self.args.contrast * np.array(self.backend.score(bare, cands), dtype=float)
        if self.args.prior_weight and self.memory is not None:
            shape = self.info["shape"]
            scores += self.args.prior_weight * np.array([self.memory.prior(shape, c) for c in cands])
        order = np.argsort(-scores, kind="stable")
        top = [[cands[i], round(float(scores[i]), 4)] for i in order[:5]]
        pick = int(order[0])
        if self.args.temperature > 0:
            p = np.exp((scores - scores.max()) / self.args.temperature)
            pick = int(self.rng.choice(len(cands), p=p / p.sum()))
        return Decision(cands[pick], "model", scores=top)

    def _by_answer(self, messages, cands) -> Decision:
        answer = self.backend.generate(messages, self.args.max_new_tokens)
        legal = self.core.legal_actions()
        res = parse_answer(answer, self.core.space_, legal,
                           allow_programs=self.text_mode and self.args.allow_programs)
        error = res.error
        if res.kind == "program":
            return Decision(res.action, "model", answer=answer)
        if res.kind == "call" and res.action in cands:
            return Decision(res.action, "model", answer=answer)
        if res.kind == "call":
            error = (f"{res.action} is left to the planner (it submits the best program at the end)"
                     if res.action == "submit()" else f"{res.action} was already tried from this program")
        return Decision(self._fallback(cands), "fallback", error=error, answer=answer)

    def _fallback(self, cands: list[str]) -> str:
        if "undo()" in cands and self.info["report"]["violations"]:
            return "undo()"
        return str(self.rng.choice(cands))

    # ------------------------------------------------------------ prompt
    def build_prompt(self, cands: list[str], without: set[str] = frozenset()):
        """Chat messages for this step; `without` names sections to leave out."""
        a, info = self.args, self.info
        sizes = info["sizes"]
        dims = ", ".join(f"{k}={v}" for k, v in sizes.items())
        words = P.shape_words(sizes)
        card = (f"Task: {_task_card(self.core.task)} Shape {info['shape']}: {dims}"
                f"{' (' + words + ')' if words else ''}. Step {self.rec.rec.steps + 1} of {a.budget}.")
        program = info["program"]
        summary = f"Program: {P.summary_line(program)}"
        full = a.program == "full" or (a.program == "auto" and a.mode == "free")
        report = "Checker: " + "\n".join(P.report_lines(info["report_text"])) if a.report else None
        measured = bool(info["measurement"] and info["measurement"]["ok"] and info["failure"] is None)
        perf = P.perf_line(self.obs["perf"], measured)
        if self.last:
            perf += f"\nLast action: {self.last}"
        sections = [("card", card, 0), ("program", summary, 1)]
        if full:
            sections.append(("program_text", f"```python\n{program.strip()}\n```", 6))
        sections += ([("report", report, 1)] if report else []) + [("perf", perf, 2)]
        kinds = {v["invariant"] for v in info["report"]["violations"]} if a.report else set()
        if self.retriever is not None:
            query = (info["report_text"] if kinds else "") + f"\n{info['shape']} {dims} {words}\n{summary}"
            hits = self.retriever.search(query, k=a.knowledge_k, task=self.core.task.name)
            if hits:
                sections.append(("knowledge", "Knowledge:\n" + "\n".join(f"- {h.entry.short()}" for h in hits), 3))
        if self.memory is not None:
            lines = self.memory.relevant(info["shape"], sizes, kinds, set(cands), k=a.memory_k)
            if lines:
                sections.append(("memory", "Memory of earlier episodes:\n" + "\n".join(f"- {x}" for x in lines), 2))
        if a.mode == "free":
            docs = "; ".join(f"{t.name}{list(t.values)}: {t.doc}" for t in self.core.space_.transforms)
            sections.append(("transforms", f"Transformations: {docs}", 7))
        sections.append(("legal", "Legal actions now: " + ", ".join(cands), 4))
        sections.append(("ask", "Answer with one legal action.", 0))
        system = P.SYSTEM_FREE if (a.mode == "free" and self.text_mode and a.allow_programs) else P.SYSTEM
        sections = [s for s in sections if s[0] not in without]
        return P.build_messages(sections, self.count, a.prompt_tokens, system)

    # ------------------------------------------------------------ acting
    def act(self, d: Decision) -> bool:
        """Step the env with the decision; record it everywhere. True when the episode ended."""
        before_key, before_state = hash(self.info["program"]), P.summary_line(self.info["program"])
        env_action, convert_error = self._env_action(d.action)
        if convert_error:
            d = Decision(self._fallback(self.candidates() or ["submit()"]), "fallback",
                         error=convert_error, answer=d.answer)
            env_action, _ = self._env_action(d.action)
        t0 = time.perf_counter()
        self.obs, reward, term, trunc, self.info = self.env.step(env_action)
        self.rec.step(env_action, reward, self.info)
        label = self.info["action"] or (d.action if len(d.action) < 60 else "program(...)")
        self.tried.add((before_key, label if self.info["error"] is None else d.action[:200]))
        kinds = sorted({v["invariant"] for v in self.info["report"]["violations"]})
        frac = self._measured_frac()
        entry = dict(getattr(self, "_pending", {}) if d.source != "policy" else {"mode": "policy"})
        self._pending = {}
        entry.update(step=self.rec.rec.steps, source=d.source, action=label, error=d.error,
                     answer=d.answer, scores=d.scores, reward=round(float(reward), 4),
                     env_error=self.info["error"], kinds=kinds, frac=round(frac, 4),
                     env_seconds=round(time.perf_counter() - t0, 3))
        self.transcript.append(entry)
        if self.memory is not None:
            self.memory.note(StepRecord(before_state, label, kinds, float(reward), frac, self.info["error"]))
        self.last = f"{label} -> reward {reward:+.2f}" + (f" (error: {self.info['error'][:160]})"
                                                           if self.info["error"] else "")
        if self.info["error"] is None:
            self._track(d.action if label == "program(...)" else label, kinds, frac)
        if self.progress:
            self.progress(self.rec.rec)
        return bool(term or trunc)

    def _env_action(self, action: str):
        """The env's action for a call or program: the text, or the catalog index."""
        if self.text_mode:
            return action, None
        if "\n" in action:
            return None, "a program needs the text environment (mode='text')"
        parsed = self.core.space_.parse_call(action)
        key = (parsed.kind, None) if parsed.kind in ("undo", "submit") else (parsed.name, parsed.value)
        try:
            return self.core.catalog.index(key), None
        except ValueError:
            return None, f"{action} is not in the catalog"

    def _measured_frac(self) -> float:
        m = self.info["measurement"]
        return float(m["frac_anchor"]) if m and m["ok"] and self.info["failure"] is None else 0.0

    def _track(self, label: str, kinds: list, frac: float) -> None:
        if label == "undo()":
            if self.path:
                self.path.pop()
                self.fracs.pop()
        elif label != "submit()":
            self.path.append(label)
            self.fracs.append(frac if not kinds else 0.0)
        if not kinds and frac > self.best[0]:
            self.best = (frac, list(self.path))
        anchor = self.fracs[self._improved_at] if self._improved_at < len(self.fracs) else 0.0
        if self._improved_at > len(self.path) or (not kinds and frac > anchor * (1 + self.args.regress_tol)):
            self._improved_at = len(self.path)

    # ------------------------------------------------------------ the shell's policy
    def police(self) -> bool:
        """After the model's step: undo a measured regression, a clean program that could
        not be measured, or violations left unfixed for more than `fix_steps` steps, back
        to the last clean measured program. True when the episode ended."""
        last = self.transcript[-1] if self.transcript else None
        if not self.args.auto_undo or not self.path or last is None or last["env_error"] \
                or last["action"] in ("undo()", "submit()"):
            return False
        anchor = max(i for i in range(len(self.path)) if self.fracs[i] > 0 or i == 0)
        kinds, frac = last["kinds"], last["frac"]
        if kinds:
            reason = "unfixed violations" if len(self.path) - anchor > self.args.fix_steps else None
        elif frac <= 0:
            reason = "not measured"
        else:
            reason = "regression" if frac < self.fracs[anchor] * (1 - self.args.regress_tol) else None
        if reason is None:
            return False
        while len(self.path) > anchor and self.rec.rec.steps + 1 + self._reserve(extra=-1) <= self.args.budget:
            if self.act(Decision("undo()", "policy", error=f"shell: undo ({reason})")):
                return True
        return False

    def finish(self) -> None:
        """Return to the best program seen (undo to the common prefix, replay), submit;
        submits where it stands when the budget runs out first."""
        common = _common_prefix(self.path, self.best[1])
        moves = ["undo()"] * (len(self.path) - common) + list(self.best[1][common:])
        for label in moves:
            if self.args.budget - self.rec.rec.steps <= 1:
                break
            why = "back to the best program" if label == "undo()" else "replay the best path"
            if self.act(Decision(label, "policy", error=f"shell: {why}")):
                return
        if self.rec.rec.steps < self.args.budget:
            self.act(Decision("submit()", "policy", error="shell: submit the best program"))


def _task_card(task) -> str:
    """The task in one short sentence: the description's first clause."""
    text = task.description.split(". ")[0].split(", as in")[0].rstrip(".")
    return text + "."


def _common_prefix(a: list, b: list) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def run(env, args: Args, progress=None, backend=None, retriever=None,
        memory: Memory | None = None) -> EpisodeRecord:
    """One episode of the planner; `backend`, `retriever` and `memory` may be shared
    across episodes (loaded once)."""
    return Planner(env, args, backend, retriever, memory, progress).run()
