"""`argus` is one command line: every command has help, `show` (alias `lower`) prints
Triton, `envs` prints the task cards."""

import subprocess
import sys

import pytest

from argus_env.cli import build_parser, main

COMMANDS = ("run", "bench", "validate", "leaderboard", "check", "show", "envs", "verify", "tasks")


def test_every_command_is_listed_with_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for cmd in COMMANDS:
        assert cmd in text, cmd
    assert "show (lower)" in text
    for cmd in COMMANDS:
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        assert f"usage: argus {cmd}" in out and len(out.splitlines()) > 3, out


def test_show_and_its_alias_lower_print_triton(capsys):
    assert main(["show", "tasks/gemm/programs/baseline.py"]) == 0
    shown = capsys.readouterr().out
    assert "@triton.jit" in shown
    assert main(["lower", "tasks/gemm/programs/baseline.py"]) == 0
    assert capsys.readouterr().out == shown


def test_envs_prints_each_task_card():
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "envs", "Argus-GEMM-v0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for needle in ("Argus-GEMM-v0", "Matrix multiplication", "split_k", "decode-16",
                   "test shapes", "## Action Space", "## Invariants"):
        assert needle in proc.stdout, needle


def test_unknown_env_is_one_line_error(capsys):
    assert main(["envs", "Argus-GEMM-v9"]) == 2
    assert "did you mean 'Argus-GEMM-v0'" in capsys.readouterr().err


def test_bench_options_override_the_suite():
    args = build_parser().parse_args(["bench", "--agents", "greedy", "--seeds", "0", "1",
                                      "--budget", "4", "--name", "quick"])
    assert (args.agents, args.seeds, args.budget, args.name, args.config) == \
        (["greedy"], [0, 1], 4, "quick", "default")


def test_bench_and_leaderboard_name_their_output_folder_alike(capsys):
    """Both take `--out-dir`; the leaderboard's old `--out` still works, warns, and says
    in --help that it is deprecated."""
    parser = build_parser()
    assert parser.parse_args(["bench", "--out-dir", "a"]).out_dir == "a"
    assert parser.parse_args(["leaderboard", "r.jsonl", "--out-dir", "b"]).out_dir == "b"
    assert capsys.readouterr().err == ""
    assert parser.parse_args(["leaderboard", "r.jsonl", "--out", "c"]).out_dir == "c"
    assert "--out is deprecated: use --out-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["leaderboard", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--out-dir OUT_DIR folder for leaderboard.md" in help_text, help_text
    assert "--out OUT_DIR deprecated alias of --out-dir" in help_text, help_text
