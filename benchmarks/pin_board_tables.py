"""Pin a committed board to the GPU table rows it replays against, before the tables grow.

A table-mode line names the rows it was priced from (`hashes.table_rows`); a replay reads
exactly those, so the tables can grow by later GPU recordings without changing it. Lines
written before that field replay against the tables as they are, and appending rows would
change their replays. This script names, for every such line, the rows the tables hold
now (run it only while the board still replays against them: `argus validate BOARD`, or
for the committed leaderboard `tests/bench/test_committed_leaderboard.py`), and prints the
`tables:` entry its suite (`configs/bench/<suite>.yaml`) needs so that the suite's own
runs read the same rows (`BenchConfig.tables`).

    python benchmarks/pin_board_tables.py benchmarks/results/leaderboard/leaderboard.jsonl
    python benchmarks/pin_board_tables.py benchmarks/results/leaderboard/leaderboard.jsonl --write

Without `--write` nothing is changed. A board whose lines of one env name different rows
cannot be pinned by one suite entry; that is reported and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from argus_env.bench import results as R
from argus_env.bench.submission import current_pricing


def pins(lines: list[dict]) -> tuple[dict, dict, list[str]]:
    """({env id: table rows}, {line number: table rows to write}, problems)."""
    memo: dict = {}
    per_env: dict[str, set] = {}
    fill: dict[int, str] = {}
    problems = []
    for n, line in enumerate(lines, 1):
        if line.get("measure") != "table":
            continue
        named = (line.get("hashes") or {}).get("table_rows")
        if named is None:
            named = current_pricing(line, memo)["table_rows"]
            fill[n] = named
        per_env.setdefault(line["env_id"], set()).add(named)
    for env_id, rows in sorted(per_env.items()):
        if len(rows) > 1:
            problems.append(f"{env_id}: lines name different table rows {sorted(rows)}")
    return {e: next(iter(r)) for e, r in per_env.items() if len(r) == 1}, fill, problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("board", type=Path, help="a results file (JSONL)")
    p.add_argument("--write", action="store_true",
                   help="write the rows into the lines that lack them")
    args = p.parse_args(argv)
    if not args.board.exists():
        p.error(f"{args.board}: no such file")
    lines = R.read_lines(args.board)
    per_env, fill, problems = pins(lines)
    for why in problems:
        print(f"cannot pin: {why}", file=sys.stderr)
    if problems:
        return 1
    print(f"{len(fill)} of {len(lines)} lines lack hashes.table_rows")
    print("tables:")
    for env_id, rows in sorted(per_env.items()):
        print(f"  {env_id}: \"{rows}\"")
    if args.write and fill:
        out = []
        for n, line in enumerate(lines, 1):
            if n in fill:
                line = {**line, "hashes": {**(line.get("hashes") or {}), "table_rows": fill[n]}}
            out.append(json.dumps(line) + "\n")
        tmp = args.board.with_suffix(".tmp")
        tmp.write_text("".join(out))
        tmp.replace(args.board)
        print(f"wrote {args.board}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
