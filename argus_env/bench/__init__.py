"""Reproducible benchmarks of agents in the Argus environments.

    argus bench                                  # run (or resume) configs/bench/default.yaml
    argus validate results/default.jsonl         # replay every record, report divergences
    argus leaderboard results/default.jsonl --out-dir leaderboard/

- `config.py`: a suite as data (agents x envs x tracks x shapes x seeds, budget, measure).
- `runner.py`: plays a suite, one JSON line per episode, resumable.
- `results.py`: the line format (an `EpisodeRecord` plus task URI, content hashes, hardware
  profile, submitted program hash) and atomic appends.
- `schema.py`: what a line may hold, checked as data before anything is made from it.
- `validate.py`: replays a record in a fresh env; a list of `Divergence`s, never a raise.
- `leaderboard.py`, `render.py`, `plots.py`: rankings as Markdown and a self-contained page.
- `submission.py`: the submission folder format and `--check`.
"""

from .config import BenchConfig, Episode, load_config  # noqa: F401
