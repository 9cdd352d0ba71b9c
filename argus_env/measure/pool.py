"""A pool of measurement workers as Ray actors, shared by every environment that asks.

    from argus_env.measure.pool import MeasurePool
    pool = MeasurePool(num_workers=8)                    # one GPU per actor (GPU backend)
    pool = MeasurePool(num_workers=2, num_gpus_per_worker=0)   # CPU stand-ins (model)
    answer = pool.measure(program.text, "gemm", {"M": 16, "N": 4096, "K": 4096})
    answers = pool.measure_many([(text, "gemm", sizes), ...])  # spread over the actors

    env = gym.make("Argus-GEMM-v0", measure="pool")     # via PoolBackend / make_backend

Each actor (`MeasureActor`) holds one backend from `local.make_local_backend`: with
`num_gpus_per_worker > 0` the live `gpu` backend (its own worker process on the GPU Ray
assigned to the actor, `CUDA_VISIBLE_DEVICES` set by Ray), with 0 a CPU stand-in that
runs the same request path with the `model` (or `table`) backend and, with
`check="interpreter"`, the Triton-interpreter correctness worker first. A request is the
program's *text* (parsed again in the actor by the whitelisting front end), the task name
and the sizes; the answer is `Measurement.to_dict()` plus `details["pool"]` (actor index,
host, pid, seconds). An actor serves one request at a time (`max_concurrency=1`: one
timing per GPU); concurrency comes from the number of actors.

Sharing: actors are *named* (`argus-measure-<pool>-<i>` in namespace "argus"), so every
process of one Ray cluster that builds `MeasurePool(name=...)` — each RLlib env runner's
`PoolBackend`, say — gets the same actors instead of starting new ones. Requests go
round-robin from each client, starting at an offset drawn from its pid, so many clients
spread over the actors; `measure_many` keeps every actor busy (`ray.util.ActorPool`).

Ray: a process that is not connected yet calls `ensure_ray`, which connects to the
cluster named by `address` or `$RAY_ADDRESS` (`"auto"`: the one running on this
machine) or else starts a local instance (`num_cpus`, `num_gpus` autodetected).

Scaling past one machine: start a Ray cluster (`ray start --head` on one node,
`ray start --address=<head>:6379` on every GPU node, or a KubeRay/`ray up` cluster) and
connect with `ray.init(address="auto")` or `RAY_ADDRESS=<head>:6379` before building the
pool (or pass `address=`); `MeasurePool(num_workers=<GPUs in the cluster>)` then places
one actor per GPU wherever the GPUs are, and env runners on any node reach them through
the actor names. Programs travel as text (a few KB) and answers as small dicts, so the
network is never the bottleneck next to a measurement. Use `strategy="SPREAD"` to place
actors on as many nodes as possible.
"""

from __future__ import annotations

import itertools
import os
import time

from ..dsl.program import Program
from ..target import Target, as_target
from .local import make_local_backend
from .measurement import Backend, Measurement

NAMESPACE = "argus"
MEASUREMENT_FIELDS = ("backend", "ok", "ms", "tflops", "anchor_tflops", "roofline_tflops",
                      "error", "details")


def ensure_ray(address: str | None = None, num_cpus: int | None = None,
               num_gpus: int | None = None, temp_dir: str | None = None,
               **init_kwargs) -> bool:
    """Connect this process to Ray unless it is already; True when this call did it.
    `address` (or `$RAY_ADDRESS`) joins an existing cluster; otherwise a local instance
    starts with `num_cpus`/`num_gpus` (None: detected) and its files under `temp_dir`
    (None: Ray's default, `$RAY_TMPDIR` or /tmp/ray)."""
    import ray
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs = dict(include_dashboard=False, **init_kwargs)
    if address is None:
        kwargs.update(num_cpus=num_cpus, num_gpus=num_gpus)
        if temp_dir:
            kwargs["_temp_dir"] = temp_dir
    ray.init(address=address, **kwargs)
    return True


class MeasureActor:
    """One measurement worker: a backend (and optionally the interpreter check) behind
    `measure(program_text, task, sizes)`. Made a Ray actor by `MeasurePool`."""

    def __init__(self, index: int, backend: str = "model", hardware: str = "h200",
                 check: str = "none", options: dict | None = None):
        if check not in ("none", "interpreter"):
            raise ValueError(f"check must be 'none' or 'interpreter', got {check!r}")
        self.index, self.check = index, check
        self.backend = make_local_backend(backend, hardware, **(options or {}))
        self.served = 0

    def measure(self, program_text: str, task: str, sizes: dict) -> dict:
        from ..task import get_task
        t0 = time.perf_counter()
        try:
            program = Program.from_text(program_text)
            task_obj = get_task(task)
            m = self._checked(program, task_obj, dict(sizes))
        except Exception as e:  # a request the actor cannot serve is an answer, not a crash
            m = Measurement("pool", False, error=f"{type(e).__name__}: {e}"[:2000],
                            details={"status": "error"})
        self.served += 1
        d = m.to_dict()
        d["details"] = dict(d["details"], pool={"worker": self.index, "pid": os.getpid(),
                                                 "host": os.uname().nodename,
                                                 "seconds": time.perf_counter() - t0})
        return d

    def _checked(self, program: Program, task, sizes: dict) -> Measurement:
        if self.check == "interpreter":
            from .worker import shared_worker
            answer = shared_worker(interpret=True).run(program.text, task.name,
                                                       task.env_check_shape)
            if not answer.get("ok"):
                status = answer.get("status", "mismatch")
                return Measurement(self.backend.name, False,
                                   error=f"{status}: {answer.get('message', '')}",
                                   details={"status": status})
        return self.backend.measure(program, sizes, task)

    def info(self) -> dict:
        return {"worker": self.index, "pid": os.getpid(), "host": os.uname().nodename,
                "backend": self.backend.name, "served": self.served,
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


class MeasurePool:
    """`num_workers` measurement actors, one GPU each (or CPU stand-ins with
    `num_gpus_per_worker=0`), found by name or created; see the module docstring.

    Detached actors (the default) outlive the process that created them, so env runners
    that found them by name keep them when that process goes; a local Ray instance
    started by `ensure_ray` takes them down when it stops, a cluster keeps them until
    `shutdown()` (or `ray.kill`). `options` go to the actors' backend (the gpu backend's
    `timeout`, `rounds`, `rep_ms`); other keywords go to `ray.init` when this process
    starts Ray."""

    def __init__(self, num_workers: int = 1, num_gpus_per_worker: float = 1.0,
                 backend: str | None = None, hardware: str = "h200", check: str = "none",
                 name: str = "default", num_cpus_per_worker: float = 1.0,
                 strategy: str | None = None, detached: bool = True,
                 address: str | None = None, options: dict | None = None,
                 **ray_init_kwargs):
        import ray
        if num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        ensure_ray(address, **ray_init_kwargs)
        self.backend = backend or ("gpu" if num_gpus_per_worker > 0 else "model")
        if self.backend == "gpu" and num_gpus_per_worker <= 0:
            raise ValueError("the gpu backend needs num_gpus_per_worker > 0")
        self.name, self.num_workers = name, num_workers
        if self.backend == "pool":
            raise ValueError("a pool's actors measure with model, table or gpu, not 'pool'")
        opts = dict(num_cpus=num_cpus_per_worker, num_gpus=num_gpus_per_worker,
                    max_concurrency=1, namespace=NAMESPACE, get_if_exists=True,
                    lifetime="detached" if detached else None)
        if strategy:
            opts["scheduling_strategy"] = strategy
        remote = ray.remote(MeasureActor)
        self.actors = [remote.options(name=f"argus-measure-{name}-{i}", **opts).remote(
            i, self.backend, hardware, check, options) for i in range(num_workers)]
        self._next = itertools.cycle(range(num_workers))
        for _ in range(os.getpid() % num_workers):   # clients start at different actors
            next(self._next)

    def submit(self, program_text: str, task: str, sizes: dict):
        """An ObjectRef to the answer from the next actor (round-robin)."""
        return self.actors[next(self._next)].measure.remote(program_text, task, dict(sizes))

    def measure(self, program_text: str, task: str, sizes: dict,
                timeout: float | None = None) -> dict:
        import ray
        return ray.get(self.submit(program_text, task, sizes), timeout=timeout)

    def measure_many(self, requests) -> list[dict]:
        """Answers to `(program_text, task, sizes)` requests in order, every actor busy."""
        from ray.util import ActorPool
        pool = ActorPool(self.actors)
        return list(pool.map(lambda a, r: a.measure.remote(r[0], r[1], dict(r[2])),
                             list(requests)))

    def info(self) -> list[dict]:
        import ray
        return ray.get([a.info.remote() for a in self.actors])

    def shutdown(self) -> None:
        """Kill the actors (they are detached: they outlive the process that made them)."""
        import ray
        for a in self.actors:
            ray.kill(a)
        self.actors = []


class PoolBackend(Backend):
    """The `Backend` interface over a `MeasurePool`: `make_backend("pool", hardware, ...)`,
    `KernelEnv(measure="pool")`. Pool options (num_workers, num_gpus_per_worker, backend,
    check, name, address) come as keywords or from `$ARGUS_POOL_WORKERS`,
    `$ARGUS_POOL_GPUS` (GPUs per worker) and `$ARGUS_POOL_BACKEND`."""

    name = "pool"

    def __init__(self, hardware: Target | str = "h200", pool: MeasurePool | None = None,
                 **pool_options):
        self.target = as_target(hardware)
        self.profile = self.target.profile
        hardware = self.target.name       # the actors build their own target by name
        if pool is None:
            env = os.environ
            pool_options.setdefault("num_workers", int(env.get("ARGUS_POOL_WORKERS", "1")))
            pool_options.setdefault("num_gpus_per_worker", float(env.get("ARGUS_POOL_GPUS", "1")))
            if env.get("ARGUS_POOL_BACKEND"):
                pool_options.setdefault("backend", env["ARGUS_POOL_BACKEND"])
            pool = MeasurePool(hardware=hardware, **pool_options)
        self.pool = pool
        self.deterministic = pool.backend != "gpu"

    def measure(self, program: Program, sizes: dict, task, features=None) -> Measurement:
        return measurement_from_dict(self.pool.measure(program.text, task.name, sizes))


def measurement_from_dict(d: dict) -> Measurement:
    """The inverse of `Measurement.to_dict()` (the derived fractions are dropped)."""
    return Measurement(**{k: d[k] for k in MEASUREMENT_FIELDS if k in d})
