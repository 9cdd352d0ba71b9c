"""The benchmark's `argus` commands: `bench`, `validate` and `leaderboard` (their options
are declared in `argus_env/cli.py` with the others)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .leaderboard import counted


def _console():
    from rich.console import Console
    return Console(highlight=False, soft_wrap=True)   # one line per message, unwrapped


def cmd_bench(args) -> int:
    from rich.table import Table

    from .config import load_config
    from .leaderboard import build
    from .results import read_lines
    from .runner import Runner
    cfg = load_config(args.config, name=args.name, agents=args.agents, envs=args.envs,
                      tracks=args.tracks, seeds=args.seeds, budget=args.budget,
                      measure=args.measure, hardware=args.hardware,
                      estimator=getattr(args, "estimator", None),
                      model_anchor=getattr(args, "model_anchor", None))
    console = _console()
    runner = Runner(cfg, args.out_dir, wandb=getattr(args, "wandb", False))
    todo, done = runner.pending()
    console.print(f"[bold]argus bench[/] {cfg.name}: {counted(len(todo) + done, 'episode')} "
                  f"({', '.join(cfg.agents)} x {', '.join(cfg.env_ids())} x "
                  f"{'/'.join(cfg.tracks)} x seeds {', '.join(map(str, cfg.seeds))}), budget "
                  f"{' and '.join(map(str, cfg.budget_axis()))}, measure={cfg.measure} ({cfg.hardware}"
                  f"{', ' + cfg.estimator + ' estimates' if cfg.measure != 'gpu' else ''}); "
                  f"{done} already in "
                  f"{runner.path}")
    summary = runner.run(console=None if args.quiet else console)
    console.print(f"{counted(summary.ran, 'episode')} run in {summary.seconds:.0f} s, "
                  f"{summary.skipped} skipped (already done): {summary.path}")
    table = Table(title=f"{cfg.name}: score (geomean over shapes of the submitted kernel's "
                        "fraction of the library)")
    for col in ("env", "track", "agent", "score", "best found", "episodes"):
        table.add_column(col)
    for b in build(read_lines(summary.path)):
        for e in b.entries:
            table.add_row(b.env_id, b.track, e.agent, f"{e.score:.3f}", f"{e.best_found:.3f}",
                          str(e.episodes))
    console.print(table)
    if args.leaderboard:
        from .render import write
        out = write(build(read_lines(summary.path)), summary.path.parent, [str(summary.path)])
        console.print(f"leaderboard: {out['markdown']} and {out['html']}")
    else:
        console.print(f"leaderboard: argus leaderboard {summary.path} --out-dir "
                      f"{summary.path.parent}")
    return 0


def _plain(value) -> str:
    """A value from a record, as text the console prints as it is (no rich markup)."""
    from rich.markup import escape
    return escape(str(value))


def _lines_of(path: Path) -> list[tuple[str, dict]]:
    from .results import read_records
    lines = read_records([path])
    if path.suffix == ".json":
        return [(str(path), lines[0])]
    return [(f"{path}:{n}", line) for n, line in enumerate(lines, 1)]


def cmd_validate(args) -> int:
    from .validate import Validator, drift, remeasure_on_gpu
    console = _console()
    if args.gpu and not _has_gpu():
        raise ValueError("--gpu: no CUDA GPU on this machine")
    validator = Validator()
    checked = 0
    for spec in args.records:
        for where, line in _lines_of(Path(spec)):
            if args.line and not where.endswith(f":{args.line}"):
                continue
            divergences = validator.validate(line)
            checked += 1
            agent, shape, seed = (_plain(line.get(k)) if isinstance(line, dict) else "?"
                                  for k in ("agent", "shape", "seed"))
            if divergences:
                console.print(f"[red]{_plain(where)}[/] ({agent}, {shape}, seed {seed}): "
                              f"{counted(len(divergences), 'divergence')}; first: "
                              f"{_plain(divergences[0])}")
                if args.json:
                    print(json.dumps([d.to_dict() for d in divergences]))
                for note in drift(line) if isinstance(line, dict) else []:
                    console.print(f"  note: the record's {_plain(note.field)} differs from "
                                  "this checkout's")
                return 1
            console.print(f"[green]ok[/] {_plain(where)}: {agent} on {shape} seed {seed}, "
                          f"{counted(len(line['actions']), 'action')} replayed")
            if args.gpu:
                g = remeasure_on_gpu(line)
                console.print(f"  gpu: {g.live_tflops or 0:.1f} TFLOP/s live vs "
                              f"{g.recorded_tflops or 0:.1f} recorded (ratio "
                              f"{g.ratio or 0:.3f}); {g.live_frac_anchor:.3f}x library live vs "
                              f"{g.recorded_frac_anchor:.3f}x recorded {_plain(g.error)}")
    if not checked:
        raise ValueError("no records to validate")
    console.print(f"{_replay(checked)} exactly")
    return 0


def cmd_leaderboard(args) -> int:
    from .leaderboard import build
    from .render import write
    from .results import read_records
    from .submission import check_submission
    console = _console()
    lines = read_records(args.results) if args.results else []
    sources = list(args.results)
    status = 0
    if args.check:
        console.print(f"[bold]checking submission[/] {_plain(args.check)} (every line checked, "
                      "then replayed)")
        problems, submitted = check_submission(args.check)
        for p in problems:
            console.print(f"[red]{_plain(p)}[/]")
        if problems:
            console.print(f"[red]rejected[/]: {counted(len(problems), 'problem')}")
            status = 1
        else:
            console.print(f"[green]ok[/]: {_replay(len(submitted))} exactly; the board "
                          "ranks the replays' figures")
            lines += submitted   # board lines: rebuilt from the replays
            sources.append(str(Path(args.check) / "results.jsonl"))
    if not lines:
        if not args.check:
            raise ValueError("give results files (JSONL from `argus bench`) or --check DIR")
        return status
    from .live import live_beside
    live = live_beside(args.results or [])   # live_*.json beside the results files
    out = write(build(lines, live=live), args.out_dir, sources)
    console.print(f"leaderboard: {out['markdown']} and {out['html']}"
                  + (f" (live figures: {', '.join(s['file'] for s in live.sources)})"
                     if live.sources else " (no live figures: every line unverified)"))
    if args.print:
        sys.stdout.write(out["markdown"].read_text())
    return status


def _replay(n: int) -> str:
    """"1 record replays", "3 records replay": the verb agrees too."""
    return f"{counted(n, 'record')} {'replays' if n == 1 else 'replay'}"


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False
