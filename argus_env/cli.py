"""The `argus` command.

    argus run --task gemm --agent greedy --budget 50   # one episode of an agent
    argus verify gemm                 # the task's programs through the whole pipeline
    argus verify gemm --program my.py # a DSL file of yours, same pipeline
    argus lower my.py                 # print the generated Triton source
    argus check my.py                 # prove its invariants, or print counterexamples
    argus tasks                       # list tasks, programs and shapes

`run` plays one episode: the agent transforms the task's baseline program, every program
is checked, run against the torch reference under the Triton interpreter and measured
by the cost model (the embedded CPU default); a summary, the best program and its Triton
source are printed and the episode record is written to `runs/`.
`verify` parses and type-checks each program, lowers it to Triton, and runs it against
the torch reference: on a GPU at the task's real shapes when one is present, otherwise
under the Triton interpreter at small ragged shapes.
"""

from __future__ import annotations

import argparse
import json
import sys
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

    from . import lower
    from .measure import oracle
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
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        job = bar.add_task("checking", total=len(programs) * len(cases))
        for name, prog in programs:
            launch = lower.load(prog, interpret=not gpu)
            for label, sizes in cases:
                bar.update(job, description=f"{name} @ {label}")
                t0 = time.perf_counter()
                verdict = oracle.check(prog, task, sizes, launch, device="cuda" if gpu else "cpu",
                                       seed=args.seed + len(rows))
                rows.append({"program": name, "hash": prog.hash, "shape": label,
                             "sizes": dict(sizes), "seconds": round(time.perf_counter() - t0, 3),
                             **verdict.to_dict()})
                bar.advance(job)
    table = Table(title=f"{task.name}: correctness against the torch reference")
    for col in ("program", "shape", "ok", "max err / rms(ref)", "time (s)"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["program"], r["shape"], "[green]yes[/]" if r["ok"] else "[red]NO[/]",
                      f"{r['max_rel_err']:.2e}", f"{r['seconds']:.2f}")
    console.print(table)
    for r in rows:
        if not r["ok"]:
            console.print(f"[red]{r['program']} @ {r['shape']}[/]: {r['message']}")
    out = Path(args.out_dir) / f"{task.name}__verify__{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"task": task.name, "mode": mode, "rows": rows}, indent=1))
    console.print(f"results: {out}")
    return 0 if all(r["ok"] for r in rows) else 1


def cmd_run(args) -> int:
    """One episode of an agent in a task's environment, with a progress bar and a summary."""
    import dataclasses

    import gymnasium as gym
    from rich.panel import Panel
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.syntax import Syntax
    from rich.table import Table

    from agents import load_agent

    from .envs import ENV_IDS

    console = _console()
    task_name = args.task or args.task_pos or "gemm"
    env_id = next((i for i, t in ENV_IDS.items() if t == task_name), None)
    if env_id is None:
        raise KeyError(f"no environment for task {task_name!r}; tasks with one: "
                       f"{', '.join(ENV_IDS.values())}")
    module = load_agent(args.agent)
    fields = {f.name for f in dataclasses.fields(module.Args)}
    agent_args = module.Args(**{k: v for k, v in dict(budget=args.budget, seed=args.seed,
                                                         shape=args.shape).items() if k in fields})
    env = gym.make(env_id, measure=args.measure, hardware=args.hardware,
                   max_episode_steps=max(args.budget, 1))
    console.print(f"[bold]argus run[/] {env_id} with agent [bold]{args.agent}[/], budget "
                  f"{args.budget} steps, measure={args.measure} ({args.hardware})")
    t0 = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        job = bar.add_task("starting", total=args.budget)

        def progress(rec):
            best = f"{rec.best_frac_anchor:.2f}x library" if rec.best_frac_anchor else "-"
            bar.update(job, completed=rec.steps,
                       description=f"{rec.shape}: best {best}, last {rec.action_labels[-1] if rec.action_labels else ''}")
        record = module.run(env, agent_args, progress=progress)
    record.seconds = round(time.perf_counter() - t0, 2)
    env.close()
    _print_episode(console, record, Table, Panel, Syntax)
    out = Path(args.out_dir) / (f"{env_id}__{args.agent}__{args.seed}__"
                                f"{time.strftime('%Y%m%d-%H%M%S')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(record.to_json())
    console.print(f"episode record: {out}")
    return 0


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
    console.print(Panel(Syntax(r.best_program, "python"), title="best program (DSL)"))
    console.print(Panel(Syntax(lower.source(Program.from_text(r.best_program)), "python"),
                        title="its Triton source"))


def cmd_lower(args) -> int:
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
    from .check import check_program
    from .dsl.program import Program
    program = Program.from_file(args.file)
    task = _task_for(program, args.task)
    if args.sizes:
        sizes = _parse_sizes(args.sizes)
    elif task is not None:
        sizes = dict(task.shapes[0].sizes)
    else:
        raise ValueError("give the problem sizes with --sizes, e.g. M=4096,N=4096,K=4096")
    report = check_program(program, sizes, task, method=args.method)
    if args.json:
        print(report.to_json())
    else:
        where = f" ({task.name} task)" if task else ""
        print(f"{args.file}{where} at {', '.join(f'{k}={v}' for k, v in sizes.items())}:")
        print(report.render(limit=args.limit))
        for note in report.notes:
            print(f"note: {note}")
    return 0 if report.ok else 1


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


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="argus", description="Argus: GPU kernel optimization "
                                 "environments with statically checked data-flow invariants")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an agent for one episode in a task's environment")
    run.add_argument("task_pos", nargs="?", metavar="TASK", help="task name (or --task)")
    run.add_argument("--task", help="task name, e.g. gemm")
    run.add_argument("--agent", default="greedy", help="agent: greedy, random")
    run.add_argument("--budget", type=int, default=50, help="environment steps")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--shape", help="shape name of the task's suite (default: drawn)")
    run.add_argument("--measure", default="model", help="throughput backend: model")
    run.add_argument("--hardware", default="h200", help="hardware profile in configs/hardware")
    run.add_argument("--out-dir", default="runs")
    run.set_defaults(fn=cmd_run)
    ver = sub.add_parser("verify", help="run a task's programs through check, lowering and "
                         "the torch reference")
    ver.add_argument("task", help="task name, e.g. gemm")
    ver.add_argument("--program", action="append", help="program name of the task (baseline, "
                     "expert) or a DSL file; repeatable; default: all of the task's programs")
    ver.add_argument("--cpu", action="store_true", help="use the Triton interpreter even if a "
                     "GPU is present")
    ver.add_argument("--split", default="train", choices=["train", "test", "all"],
                     help="shape split on a GPU")
    ver.add_argument("--shapes", type=int, default=0, help="only the first N shapes")
    ver.add_argument("--seed", type=int, default=0)
    ver.add_argument("--out-dir", default="runs")
    ver.set_defaults(fn=cmd_verify)
    low = sub.add_parser("lower", help="print the Triton source generated for a DSL file")
    low.add_argument("file")
    low.set_defaults(fn=cmd_lower)
    chk = sub.add_parser("check", help="prove a DSL file's invariants or print counterexamples")
    chk.add_argument("file")
    chk.add_argument("--task", help="task whose invariants apply (default: found from the "
                     "program's tensors)")
    chk.add_argument("--sizes", help="problem sizes, e.g. M=4096,N=4096,K=4096 (default: "
                     "the task's first shape)")
    chk.add_argument("--method", default="symbolic", choices=["symbolic", "concrete"])
    chk.add_argument("--json", action="store_true", help="print the report as JSON")
    chk.add_argument("--limit", type=int, default=10, help="violations to print")
    chk.set_defaults(fn=cmd_check)
    tasks = sub.add_parser("tasks", help="list tasks")
    tasks.set_defaults(fn=cmd_tasks)
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


if __name__ == "__main__":
    sys.exit(main())
