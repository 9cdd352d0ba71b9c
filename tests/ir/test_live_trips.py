"""Loop trips counted per program (`ir.live.loop_trips_by_axis`, `loop_work`): a loop
around the counted one whose trips all count alike is counted once and multiplied
(`_Work.same_each_trip`), with exactly the figures that walking every trip gives."""

import pytest

from argus_env.ir import live
from argus_env.ir import nodes as ir
from argus_env.ir.rewrite import walk
from argus_env.target import load_target
from argus_env.task import get_task
from argus_env.tasks.gemm.space import (BASELINE, EXPERT, SMALL_SHAPES, SPLITK, SPLITK_REDUCE,
                                        STREAMK, SWAPAB, GemmConfig)

H200 = load_target("h200")
GEMM = get_task("gemm")
CONFIGS = {"baseline": BASELINE, "expert": EXPERT, "splitk": SPLITK,
           "splitk-reduce": SPLITK_REDUCE, "swapab": SWAPAB, "streamk": STREAMK,
           # 16x32 tiles, persistent: ~1,000 tiles a program at 8192^3, the case walked slowly
           "persistent-16x32": GemmConfig(16, 32, 16, 8, 4, 16, persistent=True),
           **SMALL_SHAPES}


def _loops(kernel):
    return [n for n in walk(kernel) if isinstance(n, ir.For)]


def _walked(monkeypatch, fn, *args):
    """`fn(*args)` with every trip walked (the fast path off)."""
    with monkeypatch.context() as m:
        m.setattr(live._Work, "same_each_trip", lambda self, s: False)
        return fn(*args)


def _cases():
    for name, cfg in CONFIGS.items():
        for shape in ("square-8192", "ragged-1000", "decode-16"):
            yield pytest.param(name, cfg, shape, id=f"{name}-{shape}")


@pytest.mark.parametrize("name,cfg,shape", list(_cases()))
def test_counting_one_trip_for_all_gives_what_walking_gives(monkeypatch, name, cfg, shape):
    sizes = dict(next(c for c in GEMM.shape_cases("all") if c.name == shape).sizes)
    program = GEMM.bind(GEMM.space.program(cfg), sizes)
    kernel = program.kernel
    for loop in _loops(kernel):
        for fn in (live.loop_trips_by_axis, live.loop_work):
            fast = fn(kernel, sizes, H200.sms, loop)
            assert fast == _walked(monkeypatch, fn, kernel, sizes, H200.sms, loop), \
                (name, shape, fn.__name__, loop.var)


def test_every_task_counts_alike_both_ways(monkeypatch):
    """The baseline and expert of every registered task at every one of its shapes."""
    from argus_env.registry import env_ids
    from argus_env.task import get_task as task_of
    compared = 0
    for task_name in sorted({task for task in env_ids().values()}):
        task = task_of(task_name)
        for case in task.shape_cases("all"):
            sizes = dict(case.sizes)
            for which in sorted(task.programs):   # the DSL files: baseline, expert, ...
                kernel = task.bind(task.program(which), sizes).kernel
                for loop in _loops(kernel):
                    fast = live.loop_trips_by_axis(kernel, sizes, H200.sms, loop)
                    assert fast == _walked(monkeypatch, live.loop_trips_by_axis, kernel, sizes,
                                           H200.sms, loop), (task_name, case.name, loop.var)
                    compared += 1
    assert compared > 50


def test_a_loop_whose_trips_differ_is_walked():
    """The persistent expert's tile loop holds a k loop whose bounds no tile changes: one
    trip stands for all. Stream-K's tile loop computes each tile's share of k steps from
    the tile: walked."""
    sizes = {"M": 8192, "N": 8192, "K": 8192}

    def tile_loop_same(cfg):
        kernel = GEMM.bind(GEMM.space.program(cfg), sizes).kernel
        outer = next(n for n in _loops(kernel)   # the tile loop: the first holding a loop
                     if any(isinstance(m, ir.For) and m is not n for m in walk(n)))
        inner = [n for n in walk(outer) if isinstance(n, ir.For) and n is not outer]
        counter = live._Work(inner[-1], 1 << 20)
        return counter.same_each_trip(outer)
    assert tile_loop_same(EXPERT) is True
    assert tile_loop_same(STREAMK) is False


def test_the_iteration_limit_holds_as_when_walking(monkeypatch):
    """Counting one trip for all spends the iteration budget as walking would: past the
    limit the count is unknown (None) both ways."""
    sizes = {"M": 8192, "N": 8192, "K": 8192}
    kernel = GEMM.bind(GEMM.space.program(CONFIGS["persistent-16x32"]), sizes).kernel
    outer = live.persistent_loop(kernel)
    k_loop = [n for n in walk(outer) if isinstance(n, ir.For) and n is not outer][-1]
    for limit in (10, 500, 1 << 20):
        fast = live.loop_work(kernel, sizes, H200.sms, k_loop, limit)
        assert fast == _walked(monkeypatch, live.loop_work, kernel, sizes, H200.sms, k_loop, limit)
    assert live.loop_work(kernel, sizes, H200.sms, k_loop, 10) is None
