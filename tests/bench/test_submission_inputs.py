"""No field of a submission reaches an import, a file outside the submission folder, or
eval: every string of a line, and the paths of agent.yaml, set to a module reference, a
path out of the folder or an expression, are refused without importing the module or
opening the file; the line's env id is compared as a string before any env is made."""

import copy
import json
import os
import sys

import pytest

from argus_env.bench import validate as V
from argus_env.bench.submission import check_submission
from argus_env.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_evaluations")]

OPENED: list = []       # files opened while `_watching` is set
_watching = [False]


def _audit(event: str, args) -> None:
    if _watching[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        OPENED.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_audit)


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """A module `payload` importable from the submission folders (it leaves a marker when
    imported) and a file outside them; yields a check that neither was touched."""
    outside = tmp_path / "outside.yaml"
    outside.write_text("terms: [{type: throughput, weight: 1.0}]\n")
    marker = tmp_path / "payload-ran"
    (tmp_path / "payload.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("payload", None)
    OPENED.clear()
    _watching[0] = True

    def untouched(what: str) -> None:
        assert not marker.exists() and "payload" not in sys.modules, f"{what}: payload imported"
        assert os.path.realpath(outside) not in OPENED, f"{what}: opened {outside}"
    yield outside, untouched
    _watching[0] = False


def values(outside) -> list[str]:
    return ["payload:Argus-GEMM-v0", "payload", "__import__('payload')", str(outside),
            "../outside.yaml", "../payload.py"]


def string_fields(line: dict) -> list[tuple]:
    """(key, inner key or index) of every string in a line, one level into its maps and
    lists."""
    out = []
    for k, v in line.items():
        if isinstance(v, str):
            out.append((k, None))
        elif isinstance(v, dict):
            out += [(k, i) for i, x in v.items() if isinstance(x, str)][:3]
        elif isinstance(v, list) and v and isinstance(v[0], str):
            out.append((k, 0))
    return out


def test_no_string_of_a_line_reaches_an_import_a_path_or_eval(probe_lines, submission, hostile):
    outside, untouched = hostile
    line = probe_lines["random"]
    fields = string_fields(line)
    assert {("env_id", None), ("reward", None), ("hardware", None), ("suite", None)} <= set(fields)
    for key, inner in fields:
        for value in values(outside):
            bad = copy.deepcopy(line)
            if inner is None:
                bad[key] = value
            else:
                bad[key][inner] = value
            check_submission(submission([bad]))
            untouched(f"{key}[{inner!r}] = {value!r}")


def test_agent_yaml_paths_stay_in_the_folder(probe_lines, submission, hostile):
    outside, untouched = hostile
    line = probe_lines["random"]
    for value in values(outside):
        problems, board = check_submission(submission([line], suite=value))
        untouched(f"suite: {value!r}")
        assert board == [] and any(p.field == "suite" for p in problems), value
    for args in ({"checkpoint": str(outside)}, {"policy": {"path": "../outside.yaml"}},
                 {"checkpoint": "~/policy"}):
        problems, _ = check_submission(submission([line], args=args))
        assert any(p.field == "args" for p in problems), args
    bad = copy.deepcopy(line)
    bad["agent_args"]["checkpoint"] = "../../ppo/seed0"
    problems, board = check_submission(submission([bad]))
    assert board == [] and any(p.field == "agent_args" for p in problems), [str(p) for p in problems]


def test_a_results_file_that_links_out_of_the_folder_is_not_read(probe_lines, submission,
                                                                 hostile, tmp_path):
    outside, untouched = hostile
    outside.write_text(json.dumps(probe_lines["random"]) + "\n")
    folder = submission([probe_lines["random"]])
    (folder / "results.jsonl").unlink()
    (folder / "results.jsonl").symlink_to(outside)
    OPENED.clear()                                   # the writes above are the test's own
    problems, board = check_submission(folder)
    untouched("results.jsonl -> outside")
    assert board == [] and problems[0].file == "results.jsonl" and "link" in problems[0].message


def test_argus_validate_and_leaderboard_make_nothing_of_a_module_env_id(probe_lines, submission,
                                                                       hostile, capsys):
    """The issue's case: `module:EnvId` is Gymnasium's "import module first"."""
    _, untouched = hostile
    bad = {**probe_lines["random"], "env_id": "payload:Argus-GEMM-v0"}
    folder = submission([bad])
    assert main(["validate", str(folder / "results.jsonl")]) == 1
    untouched("argus validate")
    assert "env_id" in capsys.readouterr().out
    assert main(["leaderboard", "--check", str(folder), "--out", str(folder / "board")]) == 1
    untouched("argus leaderboard --check")
    assert "rejected" in capsys.readouterr().out
    assert V.drift(bad) == [] and V.remeasure_on_gpu(bad).error.startswith("not a valid record")
    untouched("drift, remeasure_on_gpu")


def test_the_env_id_is_one_of_the_registered_ones_as_a_string(probe_lines):
    from argus_env.bench.schema import check_line
    line = probe_lines["random"]
    assert check_line(line, extras=True) == []
    for env_id in ("payload:Argus-GEMM-v0", "argus_env.envs:Argus-GEMM-v0", "Argus-GEMM-v0 ",
                   "argus-gemm-v0", ["Argus-GEMM-v0"], None):
        got = check_line({**line, "env_id": env_id})
        assert [d.field for d in got] == ["env_id"], (env_id, got)


def test_the_schema_names_each_problem(probe_lines):
    from argus_env.bench.schema import check_line
    line = probe_lines["random"]
    cases = {"hardware": "../../etc/h200", "reward": "/tmp/reward.yaml", "shape": "no-such-shape",
             "task": "attention", "seed": -1, "measure": "pool", "mode": "python",
             "agent": "[red]x", "final_tflops": float("nan"),
             "actions": [str(a) for a in line["actions"]]}
    for key, value in cases.items():
        got = check_line({**line, key: value})
        assert [d.field for d in got] == [key], (key, [str(d) for d in got])
    got = check_line({**line, "checkpoint": "x"})
    assert [(d.field, d.got) for d in got] == [("checkpoint", "an unknown field")]
    missing = {k: v for k, v in line.items() if k != "final_program"}
    assert [d.field for d in check_line(missing)] == ["final_program"]
    assert [d.field for d in check_line(missing, extras=True)] == ["final_program"]
    no_extras = {k: v for k, v in line.items() if k != "final_measured_by"}
    assert check_line(no_extras) == [] and \
        [d.field for d in check_line(no_extras, extras=True)] == ["final_measured_by"]
