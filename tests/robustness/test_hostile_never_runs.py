"""Hostile program text never executes, through `Program.from_text` or `env.step(text)`.

Each text carries a payload that, if any part of it ran, would leave a trace: create a
canary file, connect to a listening canary socket, call a canary module's `fire`, or pass
a canary token to a builtin (`open`, `exec`, `eval`, `compile` beyond parsing,
`__import__`, `getattr`, `os.system`, `subprocess.Popen`, `socket.create_connection`),
all of which are replaced by spies for the test. The texts import modules, open files,
reach the network, call arbitrary functions, walk `getattr`/`__class__`/`__subclasses__`
chains, use format strings, decorators, default arguments and annotations with side
effects. The front end must reject every one before anything runs; the positive control
shows the canaries do fire when such a payload is executed.
"""

from __future__ import annotations

import ast
import builtins
import os
import socket
import subprocess
import sys
import types
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
import fuzz_actions as fz
from argus_env.dsl import DSLError, Program
from argus_env.envs import ENV_IDS


@dataclass
class Canaries:
    path: Path
    port: int
    token: str
    module: str
    listener: socket.socket
    fired: list = field(default_factory=list)
    calls: list = field(default_factory=list)

    def programs(self, base: str) -> list[tuple[str, str]]:
        return fz.hostile_programs(base, str(self.path), self.port, self.token, self.module)

    def carried_by(self, text: str) -> bool:
        marks = (self.token, self.module, str(self.path), f", {self.port})", "__subclasses__",
                 "breakpoint")
        return any(m in text for m in marks)

    def assert_untouched(self, what: str) -> None:
        assert not self.path.exists(), f"{what}: the canary file was created"
        assert not self.fired, f"{what}: the canary function ran: {self.fired}"
        assert not self.calls, f"{what}: builtins met the payload: {self.calls[:3]}"
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        conn.close()
        raise AssertionError(f"{what}: something connected to the canary socket")


def _mentions(value, needles, port, depth=0) -> bool:
    if isinstance(value, str):
        return any(n in value for n in needles)
    if isinstance(value, bytes):
        return any(n.encode() in value for n in needles)
    if isinstance(value, int) and not isinstance(value, bool):
        return value == port
    if isinstance(value, (tuple, list)) and depth < 2:
        return any(_mentions(v, needles, port, depth + 1) for v in value)
    if isinstance(value, os.PathLike):
        return _mentions(os.fspath(value), needles, port, depth)
    return False


@pytest.fixture
def canaries(tmp_path, monkeypatch):
    token = f"argus_canary_{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    c = Canaries(tmp_path / token, listener.getsockname()[1], token, f"{token}_mod", listener)
    module = types.ModuleType(c.module)
    module.fire = lambda *a, **k: c.fired.append((a, k))
    monkeypatch.setitem(sys.modules, c.module, module)
    needles = (c.token, str(c.path), c.module)

    def spy(name, real, only=None):
        def wrapper(*args, **kwargs):
            looked = args if only is None else args[:only]
            if _mentions(looked, needles, c.port) or _mentions(list(kwargs.values()), needles, c.port):
                c.calls.append((name, repr(args)[:200]))
            return real(*args, **kwargs)
        return wrapper

    real_compile = builtins.compile

    def compile_spy(source, filename, mode, flags=0, *args, **kwargs):
        if not flags & ast.PyCF_ONLY_AST and _mentions(source, needles, c.port):
            c.calls.append(("compile", repr(source)[:200]))  # compiling to code, not parsing
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    for name in ("open", "exec", "eval", "getattr", "breakpoint", "print", "format"):
        monkeypatch.setattr(builtins, name, spy(name, getattr(builtins, name)))
    monkeypatch.setattr(builtins, "__import__", spy("__import__", builtins.__import__, only=1))
    monkeypatch.setattr(builtins, "compile", compile_spy)
    monkeypatch.setattr(os, "system", spy("os.system", os.system))
    monkeypatch.setattr(subprocess, "Popen", spy("subprocess.Popen", subprocess.Popen))
    monkeypatch.setattr(socket, "create_connection", spy("create_connection",
                                                          socket.create_connection))
    monkeypatch.setattr(socket.socket, "connect", spy("socket.connect", socket.socket.connect))
    yield c
    listener.close()


def _bases() -> list[tuple[str, str]]:
    from argus_env.task import get_task
    return [(task, get_task(task).program("baseline").text) for task in sorted(set(ENV_IDS.values()))]


def test_canaries_fire_when_a_payload_runs(canaries):
    """Positive control: executing the payloads the programs carry trips the canaries."""
    exec(f"open({str(canaries.path)!r}, 'w').close()")
    assert canaries.path.exists() and canaries.calls, "the file canary did not see `open`"
    canaries.path.unlink()
    canaries.calls.clear()
    exec(f"__import__({canaries.module!r}).fire({canaries.token!r})")
    assert canaries.fired, "the function canary did not fire"
    canaries.fired.clear()
    canaries.calls.clear()
    exec(f"__import__('socket').create_connection(('127.0.0.1', {canaries.port})).close()")
    assert canaries.calls, "the socket spy did not see the connection"
    canaries.calls.clear()
    with pytest.raises(AssertionError, match="connected"):
        canaries.assert_untouched("control")


@pytest.mark.parametrize("task,base", _bases())
def test_hostile_programs_are_rejected_before_anything_runs(task, base, canaries):
    programs = canaries.programs(base)
    assert len(programs) >= 60, "test setup: the hostile corpus shrank"
    for name, text in programs:
        assert canaries.carried_by(text), f"test setup: {name} carries no payload"
        with pytest.raises(DSLError):
            Program.from_text(text)
        canaries.assert_untouched(f"{task}/{name} via Program.from_text")


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_hostile_programs_through_env_step(env_id, canaries):
    env = gym.make(env_id, mode="text", correctness="none")
    try:
        env.reset(seed=0)
        base = env.unwrapped.task.program("baseline").text
        for name, text in canaries.programs(base):
            obs, reward, term, trunc, info = env.step(text)
            assert info["error"] and reward < 0 and not term, (name, info["error"], reward)
            assert not info["internal_error"], (name, info["error"])
            assert env.observation_space.contains(obs), name
            canaries.assert_untouched(f"{env_id}/{name} via env.step")
        # the environment is unharmed: the baseline's own text is still accepted
        obs, reward, term, trunc, info = env.step(base)
        assert info["error"] is None, info["error"]
    finally:
        env.close()


def test_hostile_calls_through_env_step(canaries):
    """Short text actions (transformation calls) are parsed, never evaluated, too."""
    env = gym.make("Argus-GEMM-v0", mode="text", correctness="none")
    env.reset(seed=0)
    p, port, mod, tok = str(canaries.path), canaries.port, canaries.module, canaries.token
    for text in [f"open({p!r}, 'w')", f"__import__({mod!r}).fire({tok!r})",
                 f"tile_m(open({p!r}, 'w'))", f"tile_m(__import__({mod!r}).fire())",
                 f"split_k(*[__import__({mod!r}).fire()])", f"undo({tok!r}.format(1))",
                 f"getattr(__import__({mod!r}), 'fire')()", f"(lambda: open({p!r}, 'w'))()",
                 f"tile_m(x:=__import__({mod!r}).fire())", f"tile_m(f'{{open({p!r})}}')",
                 f"__import__('socket').create_connection(('127.0.0.1', {port}))"]:
        obs, reward, term, trunc, info = env.step(text)
        assert info["error"] and reward < 0, (text, info["error"])
        canaries.assert_untouched(text)
    env.close()
