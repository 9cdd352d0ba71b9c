"""The committed leaderboard against live GPU figures of its submitted kernels: per board
(env and track), each agent's score as recorded (the tables and cost models of the
board's hardware) and live (the kernels timed on a GPU by `benchmarks/record_programs.py`,
a kernel that failed there counting as 0), the two rankings, and whether they agree.

    python benchmarks/record_programs.py ...            # on the GPU: live_<gpu>.json
    python benchmarks/board_live_compare.py --live benchmarks/results/leaderboard/live_h100.json \
        --out benchmarks/results/leaderboard/compare_live_h100.json

Live figures of another GPU than the board's (an H100's against an H200 board) are
joined to the lines by env, shape and submitted program hash with the board's hardware
replaced by the file's, and every output says which GPU they come from: they check the
kernels (do they compile, are they correct, how do they rank) on real silicon, not the
board's hardware itself. CPU only; a few seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BOARD = ROOT / "benchmarks" / "results" / "leaderboard" / "leaderboard.jsonl"


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 2:
        return None
    from scipy.stats import spearmanr
    rho = spearmanr(a, b).statistic
    return None if rho != rho else float(rho)


def compare(lines: list[dict], live_path: Path, board: Path = BOARD) -> dict:
    from argus_env.bench import leaderboard as L
    from argus_env.bench.live import read_live
    from argus_env.bench.results import shown
    live = read_live(live_path)
    data = json.loads(live_path.read_text())
    hardware = data.get("hardware")
    board_hw = sorted({ln["hardware"] for ln in lines})
    as_live = [dict(ln, hardware=hardware) for ln in lines]
    boards = []
    for b in L.build(as_live, live=live):
        rows = []
        for e in b.entries:
            rows.append({"agent": e.agent, "recorded": round(e.score, 4),
                         "live": None if e.live_score is None else round(e.live_score, 4),
                         "verified": f"{e.verified}/{e.episodes}",
                         "live_failures": e.live_failures})
        have = [r for r in rows if r["live"] is not None]
        by_rec = [r["agent"] for r in sorted(have, key=lambda r: -r["recorded"])]
        by_live = [r["agent"] for r in sorted(have, key=lambda r: -r["live"])]
        boards.append({"env_id": b.env_id, "track": b.track, "budget": b.budget,
                       "agents": rows, "ranking_recorded": by_rec, "ranking_live": by_live,
                       "same_ranking": by_rec == by_live,
                       "same_first": bool(by_rec) and by_rec[0] == by_live[0],
                       "spearman": spearman([r["recorded"] for r in have],
                                            [r["live"] for r in have])})
    # the figures of the programs the lines submitted (the file may hold others: a
    # program once submitted by a line since played again)
    submitted = {(ln["env_id"], ln["shape"], ln.get("submitted_program_hash")) for ln in lines}
    figs = [f for f in data["figures"]
            if (f["env_id"], f["shape"], f["program_hash"]) in submitted]
    ratios = []
    for ln in lines:
        fig = live.of(dict(ln, hardware=hardware))
        rec = float(ln.get("final_frac_anchor") or 0.0) if ln.get("submitted") else 0.0
        if fig is not None and fig["ok"] and rec > 0:
            ratios.append(fig["frac_anchor"] / rec)
    return {"what": "committed leaderboard: recorded scores against live GPU figures of the "
                    "submitted kernels (geometric mean over episodes of the fraction of the "
                    "library timed in the same run; a kernel that failed live counts as 0)",
            "board": shown(board), "board_hardware": board_hw,
            "live_file": shown(live_path),
            "live_hardware": hardware, "live_provenance": data.get("provenance"),
            "lines": len(lines), "lines_with_live": sum(
                live.of(dict(ln, hardware=hardware)) is not None for ln in lines),
            "live_failures": sum(1 for f in figs if not f["ok"]),
            "failures": [{k: f.get(k) for k in ("env_id", "shape", "program_hash", "status",
                                                 "message")} for f in figs if not f["ok"]],
            "live_over_recorded_median": round(statistics.median(ratios), 3) if ratios else None,
            "boards": boards}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", type=Path, default=BOARD)
    ap.add_argument("--live", type=Path, required=True, help="live_<gpu>.json")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from argus_env.bench.results import read_records
    out = compare(read_records([args.board]), args.live, args.board)
    print(f"board {out['board_hardware']} against live {out['live_hardware']}: "
          f"{out['lines_with_live']}/{out['lines']} lines with a live figure, "
          f"{out['live_failures']} submitted kernels failed live; live/recorded median "
          f"{out['live_over_recorded_median']}")
    for f in out["failures"]:
        print(f"  failed live: {f['env_id']} {f['shape']} {f['program_hash']} {f['status']}: "
              f"{(f.get('message') or '')[:120]}")
    for b in out["boards"]:
        rho = "-" if b["spearman"] is None else f"{b['spearman']:.2f}"
        print(f"\n{b['env_id']} {b['track']} (budget {b['budget']}): same ranking "
              f"{b['same_ranking']}, same first {b['same_first']}, Spearman {rho}")
        print(f"  {'agent':<14}{'recorded':>10}{'live':>8}{'verified':>10}{'failed':>8}")
        for r in b["agents"]:
            live = "-" if r["live"] is None else f"{r['live']:.3f}"
            print(f"  {r['agent']:<14}{r['recorded']:>10.3f}{live:>8}{r['verified']:>10}"
                  f"{r['live_failures']:>8}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
