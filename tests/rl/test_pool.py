"""The Ray measurement pool: CPU stand-in actors serve concurrent requests, agree with the
direct backend, and back `KernelEnv(measure="pool")`."""

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.measure.backends import ModelBackend, make_backend
from argus_env.measure.pool import MeasurePool, PoolBackend, measurement_from_dict
from argus_env.task import get_task

pytestmark = pytest.mark.slow
SIZES = {"M": 16, "N": 4096, "K": 4096}


def _programs(n: int = 8):
    """Baseline and legal one-step transformations of it (distinct programs)."""
    env = gym.make("Argus-GEMM-v0", correctness="none")
    env.reset(seed=0, options={"shape": "decode-16"})
    core = env.unwrapped
    space, config = core.space_, core.state.config
    programs = [space.program(config)]
    for (name, value), ok in zip(core.catalog, core.action_mask()):
        if ok and name not in ("undo", "submit") and len(programs) < n:
            programs.append(space.program(space.apply(config, name, value, core._ctx())))
    return programs


def _comparable(d: dict) -> dict:
    d = dict(d, details={k: v for k, v in d["details"].items() if k != "pool"})
    return d


@pytest.fixture
def pool(ray_session):
    p = MeasurePool(2, num_gpus_per_worker=0, name="default")
    yield p
    p.shutdown()


def test_two_cpu_actors_serve_concurrently_and_agree(pool):
    task, direct = get_task("gemm"), ModelBackend("h200")
    programs = _programs()
    answers = pool.measure_many([(p.text, "gemm", SIZES) for p in programs])
    assert len(answers) == len(programs)
    workers = {a["details"]["pool"]["worker"] for a in answers}
    pids = {a["details"]["pool"]["pid"] for a in answers}
    assert workers == {0, 1} and len(pids) == 2, f"both actors should serve: {workers} {pids}"
    for p, a in zip(programs, answers):
        assert a["ok"], a
        assert _comparable(a) == _comparable(direct.measure(p, SIZES, task).to_dict()), p.text
    refs = [pool.submit(programs[0].text, "gemm", SIZES) for _ in range(4)]  # round-robin
    import ray
    served = {a["details"]["pool"]["worker"] for a in ray.get(refs)}
    assert served == {0, 1}, served


def test_pool_backend_in_the_env(pool, monkeypatch):
    monkeypatch.setenv("ARGUS_POOL_WORKERS", "2")
    monkeypatch.setenv("ARGUS_POOL_GPUS", "0")
    backend = make_backend("pool", "h200")
    assert isinstance(backend, PoolBackend) and backend.deterministic
    assert {i["pid"] for i in backend.pool.info()} == {i["pid"] for i in pool.info()}, \
        "a second client should find the pool's actors by name"
    env = gym.make("Argus-GEMM-v0", measure="pool", correctness="none")
    ref = gym.make("Argus-GEMM-v0", measure="model", correctness="none")
    _, info = env.reset(seed=0, options={"shape": "decode-16"})
    _, info_ref = ref.reset(seed=0, options={"shape": "decode-16"})
    assert info["measurement"]["details"]["pool"]["worker"] in (0, 1), info["measurement"]
    assert info["measurement"]["tflops"] == info_ref["measurement"]["tflops"]


def test_errors_are_answers_and_round_trip(pool):
    bad = pool.measure("this is not a program", "gemm", SIZES)
    assert not bad["ok"] and bad["details"]["status"] == "error", bad
    m = measurement_from_dict(pool.measure(_programs(1)[0].text, "gemm", SIZES))
    assert m.ok and m.backend == "model" and m.frac_anchor > 0, m


def test_interpreter_check_actor(ray_session):
    p = MeasurePool(1, num_gpus_per_worker=0, name="checked", check="interpreter",
                    num_cpus_per_worker=0)
    try:
        a = p.measure(_programs(1)[0].text, "gemm", SIZES)
        assert a["ok"] and a["backend"] == "model", a
    finally:
        p.shutdown()
