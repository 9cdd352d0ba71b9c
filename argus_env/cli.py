"""The `argus` command: one entry point for the environments, the agents and the benchmark.

    argus run --task gemm --agent greedy --budget 50   # one episode of an agent
    argus bench                       # the benchmark suite (configs/bench/default.yaml), resumable
    argus validate RECORD             # replay episode records; exit 1 at the first divergence
    argus leaderboard RESULTS...      # leaderboard.md and leaderboard.html from results files
    argus envs                        # registered environments and their task cards
    argus tasks                       # tasks, programs and shapes
    argus check my.py                 # prove a DSL file's invariants, or print counterexamples
    argus show my.py                  # the Triton source a DSL file becomes (alias: lower)
    argus verify gemm                 # the task's programs against the torch reference

`run` plays one episode: the agent transforms the task's baseline program, every program
is checked, run against the torch reference under the Triton interpreter and measured
by the cost model (the embedded CPU default); a summary, the best program and its Triton
source are printed and the episode record is written to `runs/`.
`bench` plays agents x envs x tracks x shapes x seeds under a step budget in table mode
and appends one JSON line per episode to `results/<suite>.jsonl`; `validate` replays
records from their actions in fresh environments; `leaderboard` ranks agents by the
kernels they submitted and can `--check` a submission folder by replaying it.
`verify` parses and type-checks each program, lowers it to Triton, and runs it against
the torch reference: on a GPU at the task's real shapes when one is present, otherwise
under the Triton interpreter at small ragged shapes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def _console():
    from rich.console import Console
    return Console(stderr=False, highlight=False)


def _load_program(task, spec: str):
    from .dsl.program import Program
    path = Path(spec)
    if path.suffix == ".py" or path.exists():
        if not path.exists():
            raise FileNotFoundError(f"no such DSL file: {spec}")
        return spec if not path.stem else path.stem, Program.from_file(path)
    return spec, task.program(spec)


def cmd_verify(args) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from .task import get_task

    console = _console()
    task = get_task(args.task)
    gpu = _has_gpu() and not args.cpu
    specs = args.program or list(task.programs)
    programs = []
    for spec in specs:
        name, prog = _load_program(task, spec)
        task.check_program(prog)
        programs.append((name, prog))
    if gpu:
        cases = [(c.name, c.sizes) for c in task.shape_cases(args.split)]
    else:
        cases = [("x".join(str(v) for v in s.values()), s) for s in task.cpu_shapes]
    if args.shapes:
        cases = cases[: args.shapes]
    mode = "GPU, real shapes" if gpu else "CPU, Triton interpreter, reduced shapes"
    console.print(f"[bold]argus verify[/] {task.name}: {len(programs)} program(s) x "
                  f"{len(cases)} shape(s) ({mode})")
    rows = []
    from .measure.worker import Worker
    worker = Worker(interpret=not gpu)  # a crashing kernel costs a row, not this process
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            job = bar.add_task("checking", total=len(programs) * len(cases))
            for name, prog in programs:
                for label, sizes in cases:
                    bar.update(job, description=f"{name} @ {label}")
                    t0 = time.perf_counter()
                    verdict = _verify_one(task, prog, sizes, worker, args.seed + len(rows))
                    rows.append({"program": name, "hash": prog.hash, "shape": label,
                                 "sizes": dict(sizes),
                                 "seconds": round(time.perf_counter() - t0, 3), **verdict})
                    bar.advance(job)
    finally:
        worker.stop()
    table = Table(title=f"{task.name}: correctness against the torch reference")
    for col in ("program", "shape", "ok", "max err / rms(ref)", "time (s)"):
        table.add_column(col)
    for r in rows:
        err = r.get("max_rel_err")
        table.add_row(r["program"], r["shape"], "[green]yes[/]" if r["ok"] else "[red]NO[/]",
                      f"{err:.2e}" if isinstance(err, (int, float)) else "-", f"{r['seconds']:.2f}")
    console.print(table)
    for r in rows:
        if not r["ok"]:
            console.print(f"[red]{r['program']} @ {r['shape']}[/]: {r['message']}")
    out = Path(args.out_dir) / f"{task.name}__verify__{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"task": task.name, "mode": mode, "rows": rows}, indent=1))
    console.print(f"results: {out}")
    return 0 if all(r["ok"] for r in rows) else 1


def _verify_one(task, prog, sizes, worker, seed: int, timeout: float = 300.0) -> dict:
    """The checker's verdict first (a program it refuses is never run: an unmasked
    out-of-bounds store would corrupt the interpreter's heap), then the numerics in the
    worker process."""
    from .check import CheckUnsupported, check_program
    bound = task.bind(prog, sizes)
    try:
        report = check_program(bound, sizes, task)
    except CheckUnsupported as e:
        return {"ok": False, "status": "unsupported", "message": str(e)}
    if not report.ok:
        first = (report.violations or report.undecided)[0]
        return {"ok": False, "status": report.status,
                "message": f"refused by the invariant checker, not run: {first.render()}"}
    answer = worker.run(bound.text, task.name, dict(sizes), seed=seed, timeout=timeout)
    answer.setdefault("message", "")
    return answer


def cmd_run(args) -> int:
    """One episode of an agent in a task's environment, with a progress bar and a summary."""
    import dataclasses

    import gymnasium as gym
    from rich.panel import Panel
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.syntax import Syntax
    from rich.table import Table

    from argus_env.agents import load_agent
    from argus_env.agents.tracking import run_agent

    from .envs import ENV_IDS
    from .registry import DEFAULT_TASK

    console = _console()
    task_name = args.task or args.task_pos or DEFAULT_TASK
    env_id = next((i for i, t in ENV_IDS.items() if t == task_name), None)
    if env_id is None:
        raise KeyError(f"no environment for task {task_name!r}; tasks with one: "
                       f"{', '.join(ENV_IDS.values())}")
    module = load_agent(args.agent)
    out_dir = writable_dir(args.out_dir, "--out-dir")  # found before the episode, not after
    shape = _parse_sizes(args.shape) if args.shape and "=" in args.shape else args.shape
    fields = {f.name for f in dataclasses.fields(module.Args)}
    given = {k: v for k, v in dict(budget=args.budget, seed=args.seed, shape=shape).items()
             if k in fields}
    agent_args = module.Args(**{**given, **_agent_args(module.Args, args.agent_arg or [])})
    extra = {"estimator": args.estimator, "model_anchor": args.model_anchor} \
        if args.measure in ("model", "table") else {}
    env = gym.make(env_id, measure=args.measure, hardware=args.hardware,
                   max_episode_steps=max(args.budget, 1), **extra)
    console.print(f"[bold]argus run[/] {env_id} with agent [bold]{args.agent}[/], budget "
                  f"{args.budget} steps, measure={args.measure} ({args.hardware}"
                  f"{', ' + args.estimator + ' estimates' if extra else ''})")
    t0 = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        job = bar.add_task("starting", total=args.budget)

        def progress(rec):
            if ctrl_c.is_set():  # a Ctrl-C that some finaliser swallowed still stops the run
                raise KeyboardInterrupt("interrupted")
            best = f"{rec.best_frac_anchor:.2f}x library" if rec.best_frac_anchor else "-"
            bar.update(job, completed=rec.steps,
                       description=f"{rec.shape}: best {best}, last {rec.action_labels[-1] if rec.action_labels else ''}")
        try:
            with _noting_ctrl_c() as ctrl_c:
                record = run_agent(module, env, agent_args, progress, agent=args.agent,
                                   wandb=args.wandb)
                if ctrl_c.is_set():
                    raise KeyboardInterrupt("interrupted")
        finally:  # Ctrl-C too: the workers stop, and no partial record is written
            env.close()
    record.seconds = round(time.perf_counter() - t0, 2)
    out = out_dir / (f"{env_id}__{args.agent}__{args.seed}__"
                     f"{time.strftime('%Y%m%d-%H%M%S')}.json")
    record.save(out)  # atomic: a full disk leaves no truncated record
    code = _save_code(record, out)
    _print_episode(console, record, Table, Panel, Syntax)
    console.print(f"episode record: {out}\nbest program: {code[0]}\nits Triton: {code[1]}")
    return 0


@contextlib.contextmanager
def _noting_ctrl_c():
    """A latch set by Ctrl-C (SIGINT) while the block runs, besides the KeyboardInterrupt
    it raises as usual: a KeyboardInterrupt raised inside a finaliser (a z3 object's
    `__del__` run by the garbage collector, say) is printed and dropped by Python, and the
    run would go on to the end as if no key had been pressed. The caller checks the latch
    after each step. Outside the main thread, or where SIGINT is ignored, nothing changes."""
    latch = threading.Event()
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield latch
        return

    def on_sigint(signum, frame):
        latch.set()
        _quiet_interrupted_finalisers()
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield latch
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _quiet_interrupted_finalisers() -> None:
    """After a Ctrl-C, z3 objects the interrupt left half-built (or whose `__del__` the
    KeyboardInterrupt landed in) raise in their finalisers as they are collected; Python
    prints each as "Exception ignored in ..." with a traceback, noise after a clean stop.
    From the first Ctrl-C on, such reports from z3's finalisers are dropped; every other
    unraisable exception is reported as before."""
    previous = sys.unraisablehook
    if getattr(previous, "_argus_quiet", False):
        return

    def hook(unraisable):
        # the object is the finaliser itself (`AstRef.__del__`), named by its module
        from_z3 = (getattr(unraisable.object, "__module__", None) or "").startswith("z3")
        if from_z3 and issubclass(unraisable.exc_type, (KeyboardInterrupt, AttributeError)):
            return
        previous(unraisable)
    hook._argus_quiet = True
    sys.unraisablehook = hook


def _agent_args(cls, pairs: list[str]) -> dict:
    """`--agent-arg KEY=VALUE` pairs as values of the agent's `Args` fields, converted to
    each field's type; an unknown key names the fields there are."""
    import dataclasses
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in fields:
            close = ", ".join(sorted(fields))
            raise ValueError(f"--agent-arg wants KEY=VALUE with KEY one of {close}; got {pair!r}")
        kind = fields[key].type if isinstance(fields[key].type, str) else \
            getattr(fields[key].type, "__name__", "str")
        out[key] = _convert(value, str(kind), key)
    return out


def _convert(value: str, kind: str, key: str):
    try:
        if kind.startswith("bool"):
            if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(value)
            return value.lower() in ("1", "true", "yes")
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
    except ValueError:
        raise ValueError(f"--agent-arg {key}: {value!r} is not a {kind}") from None
    return None if value == "None" and "None" in kind else value


def _save_code(record, out: Path) -> tuple[Path, Path]:
    """The best program and its Triton source, whole, beside the episode record."""
    from . import lower
    from .dsl.program import Program
    dsl = out.with_suffix(".dsl.py")
    triton = out.with_suffix(".triton.py")
    dsl.write_text(record.best_program)
    triton.write_text(lower.source(Program.from_text(record.best_program)))
    return dsl, triton


def writable_dir(path, option: str) -> Path:
    """`path` as a folder this process can write files in (created if missing), or a
    ValueError naming `option`: checked before long work, so it is not lost at the end."""
    import tempfile
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".argus-write-test.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"{option} {folder}: cannot write there ({e.strerror or e})") from None
    return folder


def _print_episode(console, r, Table, Panel, Syntax) -> None:
    from . import lower
    from .dsl.program import Program
    t = Table(title=f"{r.env_id} on {r.shape} {tuple(r.sizes.values())}, agent {r.agent}")
    t.add_column("measure")
    t.add_column("value", justify="right")
    base = f"{r.baseline_tflops:.1f}" if r.baseline_tflops else "-"
    best = f"{r.best_tflops:.1f}" if r.best_tflops else "-"
    for name, value in (("steps", r.steps), ("return", f"{r.return_:.3f}"),
                        ("baseline TFLOP/s", base), ("best TFLOP/s", best),
                        ("best fraction of library", f"{r.best_frac_anchor:.3f}"),
                        ("invariant violations met", sum(r.violations_met.values())),
                        ("violations fixed", r.violations_fixed),
                        ("invalid actions", r.invalid_actions), ("submitted", r.submitted),
                        ("seconds", r.seconds)):
        t.add_row(name, str(value))
    console.print(t)
    if r.violations_met:
        console.print("violations by invariant: " + ", ".join(f"{k} x{v}" for k, v in
                                                              sorted(r.violations_met.items())))
    triton = lower.source(Program.from_text(r.best_program))
    if console.is_terminal:
        console.print(Panel(Syntax(r.best_program, "python", word_wrap=True),
                            title="best program (DSL)"))
        console.print(Panel(Syntax(triton, "python", word_wrap=True), title="its Triton source"))
    else:  # piped: the code exactly as it is, never cut to a terminal's width
        console.file.write(f"# best program (DSL)\n{r.best_program.rstrip()}\n\n"
                           f"# its Triton source\n{triton.rstrip()}\n")


def cmd_show(args) -> int:
    from . import lower
    from .dsl.program import Program
    sys.stdout.write(lower.source(Program.from_file(args.file)))
    return 0


def _parse_sizes(text: str) -> dict[str, int]:
    sizes = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if not name.strip().isidentifier() or not value.strip().isdigit():
            raise ValueError(f"--sizes wants NAME=INT pairs like M=4096,N=4096,K=4096; got {part!r}")
        sizes[name.strip()] = int(value)
    return sizes


def _task_for(program, name: str | None):
    from .task import KNOWN_TASKS, TaskInterfaceError, get_task
    if name:
        return get_task(name)
    for candidate in KNOWN_TASKS:
        try:
            task = get_task(candidate)
            task.check_program(program)
            return task
        except (KeyError, TaskInterfaceError):
            continue
    return None


def cmd_check(args) -> int:
    """Prove a DSL file's invariants for all sizes where it can (the task's varying sizes,
    once per combination of the other sizes its shapes have), and elsewhere at the task's
    shapes (problem constants bound per shape, as the environment does), its small ragged
    ones and adversarial ones (tiny, one past each tile size); or only at `--sizes` (merged
    into the task's first shape). Exits 0 when every check is proven, 1 when any is
    violated or undecided."""
    from .check import CheckUnsupported, check_for_all_sizes, check_program
    from .dsl.program import Program
    program = Program.from_file(args.file)
    task = _task_for(program, args.task)
    cases = _check_cases(task, args.sizes)
    results, proofs, why = [], {}, ""
    if task is not None and not args.sizes and args.method == "symbolic":
        names = getattr(task, "for_all_sizes", ())
        for label, sizes in list(cases):
            fixed = tuple(sorted((k, v) for k, v in sizes.items() if k not in names))
            if fixed in proofs:
                continue
            try:
                proofs[fixed], why = check_for_all_sizes(task.bind(program, sizes), sizes, task)
            except CheckUnsupported as e:
                print(f"argus: error: {e}", file=sys.stderr)
                return 1
        covered = {f for f, r in proofs.items() if r is not None and r.ok}
        for fixed in covered:
            results.append(("all sizes", dict(fixed), proofs[fixed]))
        cases = [(label, sizes) for label, sizes in cases if tuple(sorted(
            (k, v) for k, v in sizes.items() if k not in names)) not in covered]
        if cases:
            cases += _adversarial_cases(task, program, cases)
    for label, sizes in cases:
        bound = task.bind(program, sizes) if task is not None else program
        try:
            report = check_program(bound, sizes, task, method=args.method)
        except CheckUnsupported as e:
            print(f"argus: error: {e}", file=sys.stderr)
            return 1
        results.append((label, sizes, report))
    if args.json:
        print(json.dumps([{"shape": label, "sizes": sizes, "report": r.to_dict()}
                          for label, sizes, r in results]))
    else:
        where = f" ({task.name} task)" if task else ""
        for label, sizes, report in results:
            if report.ok and (len(results) > 1 or label == "all sizes") and not args.verbose:
                continue
            print(f"{args.file}{where} at {label} "
                  f"({', '.join(f'{k}={v}' for k, v in sizes.items())}):")
            print(report.render(limit=args.limit))
            for note in report.notes:
                print(f"note: {note}")
        bad = [label for label, _, r in results if not r.ok]
        for label, fixed, r in results:
            if label == "all sizes":
                print(f"{args.file}{where}: proven {r.notes[-1]}")
        if why and any(label != "all sizes" for label, _, _ in results):
            print(f"{args.file}{where}: checked size by size: {why}")
        print(f"{args.file}{where}: {len(results) - len(bad)} of {len(results)} checks proven"
              + (f"; not proven at {', '.join(bad)}" if bad else ""))
    return 0 if all(r.ok for _, _, r in results) else 1


def _adversarial_cases(task, program, cases) -> list[tuple[str, dict]]:
    """Sizes where masks and partial tiles go wrong, for a program checked size by size:
    each varying size 1 (tiny), and one past each tile size of the program (a partial last
    tile of one element), on the first shape's other sizes."""
    names = [n for n in getattr(task, "for_all_sizes", ()) if n in cases[0][1]]
    if not names:
        return []
    base = dict(cases[0][1])
    tiles = sorted({v for k, v in program.kernel.consts.items()
                    if isinstance(v, int) and not isinstance(v, bool) and 2 <= v <= 4096})
    out = [("tiny", {**base, **{n: 1 for n in names}})]
    out += [(f"one past {t}", {**base, **{n: t + 1 for n in names}}) for t in tiles[:4]]
    return out


def _check_cases(task, given: str | None) -> list[tuple[str, dict]]:
    """`--sizes` merged into the task's first shape, or else every shape of the task's suite
    and its small ragged CPU shapes (the sizes where masks and partial tiles matter)."""
    if given:
        sizes = _parse_sizes(given)
        if task is not None:
            base = dict(task.shapes[0].sizes)
            unknown = sorted(set(sizes) - set(base))
            if unknown:
                raise ValueError(f"--sizes: {task.name} has no size {unknown[0]!r}; its sizes "
                                 f"are {', '.join(base)}")
            sizes = {**base, **sizes}
        return [("--sizes", sizes)]
    if task is None:
        raise ValueError("give the problem sizes with --sizes, e.g. M=4096,N=4096,K=4096")
    cases = [(c.name, dict(c.sizes)) for c in task.shapes]
    full = set(task.shapes[0].sizes)
    cases += [("x".join(map(str, s.values())), dict(s)) for s in task.cpu_shapes
              if set(s) == full]
    return cases


def cmd_tasks(args) -> int:
    from .task import KNOWN_TASKS, get_task
    console = _console()
    for name in KNOWN_TASKS:
        try:
            task = get_task(name)
        except KeyError:
            continue
        console.print(f"[bold]{name}[/]: {task.description}")
        console.print(f"  programs: {', '.join(task.programs)}")
        for split in ("train", "test"):
            shapes = ", ".join(c.name for c in task.shape_cases(split))
            console.print(f"  {split} shapes: {shapes}")
    return 0


def cmd_envs(args) -> int:
    """Each registered env's task card: KernelEnv's docstring and its task's details."""
    import inspect

    from .envs import ENV_IDS, KernelEnv
    from .task import get_task
    console = _console()
    ids = [args.env_id] if args.env_id else list(ENV_IDS)
    for env_id in ids:
        if env_id not in ENV_IDS:
            from .bench.config import _unknown
            raise KeyError(_unknown("env", env_id, ENV_IDS))
        task = get_task(ENV_IDS[env_id])
        console.rule(f"[bold]{env_id}[/] (task {task.name})")
        console.print(f"[bold]Task[/]: {task.description}", markup=True)
        catalog: dict = {}
        for name, value in task.space.catalog():
            catalog.setdefault(name, []).append(value)
        console.print("[bold]Catalog[/] (transformation: values):")
        for name, values in catalog.items():
            vals = ", ".join(repr(v) for v in values if v is not None)
            console.print(f"  {name}{': ' + vals if vals else '()'}", markup=False)
        for split in ("train", "test"):
            shapes = ", ".join(f"{c.name} ({'x'.join(map(str, c.sizes.values()))})"
                               for c in task.shape_cases(split))
            console.print(f"[bold]{split} shapes[/]: {shapes}")
        console.print(f"[bold]Programs[/]: {', '.join(task.programs)}")
        if not args.brief:
            console.print(inspect.cleandoc(KernelEnv.__doc__ or ""), markup=False)
    return 0


def _bench_cmd(name: str):
    """A command of `argus_env/bench/commands.py`, imported when it runs."""
    def run(args) -> int:
        from .bench import commands
        return getattr(commands, name)(args)
    return run


WANDB_HELP = ("log each env step's reward and best fraction of the library, and the "
              "episode's summary, to W&B: offline unless WANDB_MODE is set (`wandb sync` "
              "uploads later), files under $WANDB_DIR or else ./wandb; needs pip install -e "
              "'.[track]'")


class _Deprecated(argparse.Action):
    """An option kept under its old name: it sets the new option's value and says so."""

    def __call__(self, parser, namespace, values, option_string=None):
        new = "--" + self.dest.replace("_", "-")
        print(f"argus: warning: {option_string} is deprecated: use {new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def build_parser() -> argparse.ArgumentParser:
    from argus_env.agents import AGENTS

    from .registry import TASKS
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(
        prog="argus", formatter_class=fmt,
        description="Argus: GPU kernel optimization environments with statically checked "
                    "data-flow invariants, their agents and their benchmark.",
        epilog="`argus COMMAND --help` explains each command. Records and results replay "
               "exactly in table and model mode: see `argus validate`.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, fn, summary, details="", aliases=()):
        p = sub.add_parser(name, help=summary, aliases=list(aliases), formatter_class=fmt,
                           description=summary[0].upper() + summary[1:] + (".\n\n" + details
                                                                           if details else "."))
        p.set_defaults(fn=fn)
        return p

    run = command("run", cmd_run, "run an agent for one episode in a task's environment",
                  "Prints a summary, the best program and its Triton source, and writes a "
                  "replayable episode record (JSON) to --out-dir.")
    run.add_argument("task_pos", nargs="?", metavar="TASK", help="task name (or --task)")
    run.add_argument("--task", help=f"task name: {', '.join(TASKS)}")
    run.add_argument("--agent", default="greedy", help=f"agent: {', '.join(AGENTS)}")
    run.add_argument("--budget", type=int, default=50, help="environment steps")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--shape", help="shape name of the task's suite, or custom sizes such "
                     "as M=777,N=1234,K=4096 (default: drawn)")
    run.add_argument("--agent-arg", action="append", metavar="KEY=VALUE",
                     help="a field of the agent's Args, e.g. checkpoint=runs/ppo/x/final "
                     "(repeatable)")
    run.add_argument("--measure", default="model", help="throughput backend: model, table, gpu")
    run.add_argument("--hardware", default="h200", help="hardware profile in configs/hardware")
    run.add_argument("--estimator", default="corrected", choices=["corrected", "analytic"],
                     help="model prices: the analytic model times the learned correction "
                          "for the hardware (corrected) or the analytic model alone")
    run.add_argument("--model-anchor", default="measured", choices=["measured", "roofline"],
                     help="the library figure a model price is a fraction of, off the H200: "
                          "as the GPU tables timed it at the shape (measured) or 0.9 x the "
                          "roofline (as records made before this option were priced)")
    run.add_argument("--out-dir", default="runs")
    run.add_argument("--wandb", action="store_true", help=WANDB_HELP + ", named "
                     "ENV__AGENT__SEED__TIME")

    bench = command("bench", _bench_cmd("cmd_bench"), "run the benchmark suite: agents x envs x "
                    "tracks x shapes x seeds under a step budget",
                    "Appends one JSON line per episode (the episode record, its task URI, content "
                    "hashes and hardware profile) to OUT_DIR/NAME.jsonl, and skips the episodes "
                    "already there, so an interrupted run resumes. Options override the suite's "
                    "YAML (configs/bench/default.yaml by default).")
    bench.add_argument("--config", default="default", help="suite: a name in configs/bench or a "
                       "YAML path")
    bench.add_argument("--name", help="results file name (default: the suite's name)")
    bench.add_argument("--agents", nargs="+", help="only these of the suite's agents (or "
                       "registered agents with default arguments)")
    bench.add_argument("--envs", nargs="+", help="registered env ids, or all")
    bench.add_argument("--tracks", nargs="+", choices=["train", "test"])
    bench.add_argument("--seeds", nargs="+", type=int)
    bench.add_argument("--budget", type=int, help="env steps per episode")
    bench.add_argument("--measure", choices=["table", "model", "gpu"])
    bench.add_argument("--hardware", help="hardware profile in configs/hardware")
    bench.add_argument("--estimator", choices=["corrected", "analytic"],
                       help="model prices: the analytic model times the learned correction "
                            "(corrected) or the analytic model alone")
    bench.add_argument("--model-anchor", choices=["measured", "roofline"],
                       help="the library figure model prices are fractions of, off the H200 "
                            "(default: the suite's)")
    bench.add_argument("--out-dir", default="results")
    bench.add_argument("--quiet", action="store_true", help="no progress display")
    bench.add_argument("--wandb", action="store_true", help=WANDB_HELP + ", one run per "
                       "episode named ENV__AGENT__SEED__TIME__SHAPE, grouped by suite")
    bench.add_argument("--leaderboard", action="store_true", help="then write leaderboard.md "
                       "and leaderboard.html of the results file next to it")

    val = command("validate", _bench_cmd("cmd_validate"), "replay episode records and report "
                  "where they diverge",
                  "RECORD is a results file (JSONL, every line replayed) or an `argus run` "
                  "record (JSON). Each record is first checked as data (known fields and types, a "
                  "registered env id, known shape, hardware and reward names; one that fails is "
                  "not replayed), then replayed from its actions in a fresh env (same "
                  "env id, mode, measure, hardware, seed and shape); every reward, invariant "
                  "report and measurement is compared, then the final program. Exits 1 at the "
                  "first divergence, printing it. Agents that reset several times record every "
                  "episode's actions, and every episode is replayed (a record written before "
                  "they did: its last episode, bounding the figures over all of them).")
    val.add_argument("records", nargs="+", metavar="RECORD")
    val.add_argument("--line", type=int, help="only this line of a results file")
    val.add_argument("--gpu", action="store_true", help="also time each final program on this "
                     "machine's GPU and print the ratio to the recorded throughput")
    val.add_argument("--json", action="store_true", help="print the divergences as JSON")

    lb = command("leaderboard", _bench_cmd("cmd_leaderboard"), "rank agents from results files "
                 "into leaderboard.md and leaderboard.html",
                 "Per env, track and budget: agents ranked by the geometric mean over shapes of "
                 "the submitted kernel's fraction of the library (mean over seeds, min-max "
                 "spread), steps to 90% of the best known, invalid-action rate, invariant "
                 "violations met. An episode is its agent, env, shape, seed and budget: results "
                 "of several budgets (the same suite at 10 and 50 steps, in one file or several) "
                 "make a board per budget, ranked apart and titled with it; the same episode "
                 "twice at one budget is an error. --check DIR validates a submission folder (results.jsonl, agent.yaml, "
                 "README.md; templates in argus_env/bench/templates/submission): every line is "
                 "checked as data and against the suite's rules, the lines that pass are "
                 "replayed, and when all of them replay the submission joins the leaderboard "
                 "with the figures of the replays.")
    lb.add_argument("results", nargs="*", metavar="RESULTS", help="JSONL files of `argus bench`")
    lb.add_argument("--out-dir", default="leaderboard", help="folder for leaderboard.md/.html "
                    "(default: leaderboard)")
    lb.add_argument("--out", dest="out_dir", metavar="OUT_DIR", action=_Deprecated,
                    help="deprecated alias of --out-dir (bench names its folder so too)")
    lb.add_argument("--check", metavar="DIR", help="a submission folder to replay and add")
    lb.add_argument("--print", action="store_true", help="also print the Markdown")

    chk = command("check", cmd_check, "prove a DSL file's invariants or print counterexamples",
                  "By default at every shape of the task's suite and at its small ragged "
                  "shapes, with the task's problem constants bound per shape. Exits 1 when "
                  "an invariant is violated or undecided at any of them, 2 on a usage error.")
    chk.add_argument("file")
    chk.add_argument("--task", help="task whose invariants apply (default: found from the "
                     "program's tensors)")
    chk.add_argument("--sizes", help="problem sizes, e.g. M=4096,N=4096,K=4096, merged into "
                     "the task's first shape (default: all of the task's shapes)")
    chk.add_argument("--verbose", action="store_true", help="print every size's report")
    chk.add_argument("--method", default="symbolic", choices=["symbolic", "concrete"])
    chk.add_argument("--json", action="store_true", help="print the report as JSON")
    chk.add_argument("--limit", type=int, default=10, help="violations to print")

    show = command("show", cmd_show, "print the Triton source a DSL file becomes",
                   "The kernel and its launcher, as the lowering emits them.", aliases=("lower",))
    show.add_argument("file")

    envs = command("envs", cmd_envs, "list the registered environments with their task cards",
                   "For each env id: the task's description, its catalog of transformations, "
                   "its train and test shapes, its programs, and the KernelEnv card (actions, "
                   "observations, rewards, episode end, arguments, invariants).")
    envs.add_argument("env_id", nargs="?", help="only this env id")
    envs.add_argument("--brief", action="store_true", help="without the KernelEnv card")

    ver = command("verify", cmd_verify, "run a task's programs through check, lowering and "
                  "the torch reference",
                  "On a GPU at the task's real shapes when one is present, otherwise under the "
                  "Triton interpreter at small ragged shapes.")
    ver.add_argument("task", help=f"task name: {', '.join(TASKS)}")
    ver.add_argument("--program", action="append", help="program name of the task (baseline, "
                     "expert) or a DSL file; repeatable; default: all of the task's programs")
    ver.add_argument("--cpu", action="store_true", help="use the Triton interpreter even if a "
                     "GPU is present")
    ver.add_argument("--split", default="train", choices=["train", "test", "all"],
                     help="shape split on a GPU")
    ver.add_argument("--shapes", type=int, default=0, help="only the first N shapes")
    ver.add_argument("--seed", type=int, default=0)
    ver.add_argument("--out-dir", default="runs")

    command("tasks", cmd_tasks, "list tasks with their programs and train/test shapes")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from .dsl.errors import DSLError
    from .task import TaskInterfaceError
    try:
        return args.fn(args)
    except (DSLError, TaskInterfaceError, FileNotFoundError, KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"argus: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `argus check --json | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except RuntimeError as e:
        if type(e).__name__ != "ModelUnavailable":  # the LLM agent's model: say how to fix
            raise
        print(f"argus: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("argus: interrupted: stopped before the end; no partial result was written",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
