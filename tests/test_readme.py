"""The README's quickstart holds exactly two commands, and CI runs the test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the quickstart has a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quickstart_has_two_commands():
    cmds = _quickstart_commands()
    assert len(cmds) == 2, f"expected two commands, got {cmds}"
    assert "argus run --task gemm" in cmds[0], cmds[0]
    assert "pytest" in cmds[1], cmds[1]
    for c in cmds:
        assert "torch==2.13.0" in c, f"torch must be pinned so installs stay small: {c}"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _quickstart_commands()[1] in ci, "CI must run the README's test command verbatim"
