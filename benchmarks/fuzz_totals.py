"""Add up long fuzz runs (`fuzz_envs.py` summaries) into one record per environment id.

Each input is the summary of one run for one env id (`fuzz_<env>.json`, a single process
or shards merged). A run counts towards the figure when it is clean: no uncaught
exception, no hang, no refusal without a message or penalty (contained internal errors
are listed, not failures). Runs that found problems are listed with them and not counted.
With `--since COMMIT` each env id also gets the clean actions of runs made at COMMIT or a
later commit (the figure after the last fix):

    python benchmarks/fuzz_totals.py benchmarks/results/fuzz/*/fuzz_*.json \\
        --since e6a2470 --out benchmarks/results/fuzz/totals.json
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def is_descendant(commit: str | None, since: str) -> bool:
    """Whether `commit` is `since` or made after it (in this repository's history)."""
    if not commit:
        return False
    r = subprocess.run(["git", "merge-base", "--is-ancestor", since, commit], cwd=ROOT,
                       capture_output=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"git cannot compare {since} and {commit}: {r.stderr.decode()[:200]}")
    return r.returncode == 0


def totals(runs: list[tuple[str, dict]], since: str | None = None) -> dict:
    from fuzz_envs import clean
    by_env: dict[str, dict] = {}
    for path, s in runs:
        for key in ("env_id", "actions", "problems", "outcomes"):
            if key not in s:
                raise SystemExit(f"{path}: not a fuzz_envs.py summary (no {key!r})")
        prov = s.get("provenance", {})
        ok = clean(s["problems"])
        e = by_env.setdefault(s["env_id"], {"actions": 0, "actions_in_runs_with_problems": 0,
                                            "measured": 0, "runs": [],
                                            "problems_found": collections.Counter(),
                                            "internal_errors_contained": 0})
        e["actions" if ok else "actions_in_runs_with_problems"] += s["actions"]
        e["measured"] += s["outcomes"].get("measured", 0) if ok else 0
        e["problems_found"].update(s["problems"])
        e["internal_errors_contained"] += s["problems"].get("internal-error-contained", 0)
        run = {"file": path, "actions": s["actions"], "clean": ok, "problems": s["problems"],
               "measured": s["outcomes"].get("measured", 0),
               "commit": prov.get("commit"), "dirty": prov.get("dirty"),
               "date": prov.get("date"), "cpus": prov.get("cpus"),
               "processes": len(s.get("shards", [])) or 1,
               "wall_seconds": round(s.get("wall_seconds", 0.0)),
               "correctness": s.get("settings", {}).get("correctness"),
               "seeds": s.get("settings", {}).get("seed"),
               "note": s.get("note")}
        if since is not None:
            run["since"] = is_descendant(prov.get("commit"), since)
        e["runs"].append(run)
    for e in by_env.values():
        e["problems_found"] = dict(e["problems_found"])
        if since is not None:
            e["actions_since"] = sum(r["actions"] for r in e["runs"] if r["clean"] and r["since"])
    return {"since": since, "envs": dict(sorted(by_env.items()))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--since", help="also count the clean actions of runs at this commit or later")
    ap.add_argument("--target", type=int, default=100_000, help="actions per env id")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    runs = []
    for p in args.files:
        try:
            runs.append((str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT)
                         else str(p), json.loads(p.read_text())))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{p}: cannot read a summary: {e}") from None
    out = totals(runs, args.since)
    out["target"] = args.target
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    cols = ["env id", "clean actions", "measured", "runs", "not counted"] + \
        ([f"since {args.since[:8]}"] if args.since else [])
    print(" | ".join(cols))
    met = True
    for env_id, e in out["envs"].items():
        row = [env_id, f"{e['actions']:,}", f"{e['measured']:,}", str(len(e["runs"])),
               f"{e['actions_in_runs_with_problems']:,}"]
        if args.since:
            row.append(f"{e['actions_since']:,}")
        print(" | ".join(row))
        met &= (e["actions_since"] if args.since else e["actions"]) >= args.target
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
