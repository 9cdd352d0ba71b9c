"""One local Ray instance for the RL tests (2 CPUs, no dashboard, token auth off), with
HOME and Ray's session files in a temporary folder; stopped after the last test."""

import os
import shutil
import tempfile

import pytest


@pytest.fixture(scope="session")
def ray_session():
    pytest.importorskip("ray.rllib")
    import ray

    from argus_env.measure.pool import ensure_ray
    # a short path: Ray's Unix sockets live under the temp dir (107-byte limit)
    tmp = tempfile.mkdtemp(prefix="argus-ray-", dir="/tmp")
    saved = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE")}
    os.environ["HOME"] = os.path.join(tmp, "home")      # Ray writes ~/.ray
    os.makedirs(os.environ["HOME"], exist_ok=True)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    started = ensure_ray(num_cpus=2, temp_dir=os.path.join(tmp, "r"), log_to_driver=False)
    try:
        yield tmp
    finally:
        if started:
            ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp, ignore_errors=True)
