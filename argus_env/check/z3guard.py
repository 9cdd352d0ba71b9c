"""z3 used by one thread at a time, whichever threads free its objects.

z3's C API is not thread-safe: two calls on one context at the same moment corrupt it.
Python makes such calls without being asked to: the garbage collector frees z3 objects
(`AstRef.__del__` calls `Z3_dec_ref`) in whichever thread happens to run it, and a z3 call
releases the interpreter lock (ctypes does). So a background thread that merely allocates
(a progress bar's monitor, an evaluator's numerics lane, a library's callback thread) can
free an expression inside z3 while a query runs there, and the process dies later in a
segmentation fault far from either.

The project's z3 work runs in a `session()` (the checker's entry points): a re-entrant lock
held for the session's length. `install()` wraps z3's release functions (`Z3_*dec_ref`,
`Z3_del_*`): a release from the session's own thread goes straight through (one thread's
calls are serial); one from any other thread takes the lock if it is free, and otherwise is
queued and made by the session's thread before its session ends. Two sessions in two
threads run one after the other. A check asks its queries in a z3 context of its own
(`isolated`): where that context is deleted, the releases queued for it are made first.
Installed when `argus_env.check` is imported, before any expression is made; it changes no
result (`tests/check/test_z3_threads.py`).
"""

from __future__ import annotations

import collections
import functools
import sys
import threading
from contextlib import contextmanager

import z3  # noqa: F401  (the package, so that z3.z3 and z3.z3printer's bindings are wrapped)
from z3 import z3core

#: held by the thread in a session, for the session's length
LOCK = threading.RLock()

_MARK = "__argus_z3_guarded__"
_state = {"owner": None}       # the thread in a session, if any
_pending: collections.deque = collections.deque()  # releases queued from other threads


def _releases(name: str) -> bool:
    return name.startswith("Z3_") and (name.endswith("_dec_ref") or name.startswith("Z3_del_"))


def _guarded(f):
    # what a release needs is bound here: at interpreter exit z3's objects are freed after
    # this module's globals are gone
    state, lock, pending, get_ident = _state, LOCK, _pending, threading.get_ident
    # a context of its own per check (`isolated`): a release of one of its terms queued
    # from another thread must be made before the context is deleted, never after
    deletes_context = getattr(f, "__name__", "") == "Z3_del_context"

    def call(args):
        while deletes_context and pending:
            g, queued = pending.popleft()
            try:
                g(*queued)
            except Exception:  # as in `_drain`
                pass
        return f(*args)

    @functools.wraps(f)
    def release(*args):
        if state["owner"] == get_ident():  # the session's own thread: serial with its queries
            # (a term's release, by far the most frequent: straight to z3)
            return call(args) if deletes_context else f(*args)
        if lock.acquire(blocking=False):
            try:
                return call(args)
            finally:
                lock.release()
        pending.append((f, args))     # another thread is in z3: it makes the call
    setattr(release, _MARK, f)
    return release


def _drain() -> None:
    while _pending:
        f, args = _pending.popleft()
        try:
            f(*args)
        except Exception:  # as in `__del__`, where the call came from: nothing to report to
            pass


@contextmanager
def session():
    """Hold z3 for this thread: no other thread's z3 release runs meanwhile."""
    with LOCK:
        outer = _state["owner"]
        _state["owner"] = threading.get_ident()
        try:
            _drain()
            yield
        finally:
            _drain()
            _state["owner"] = outer


def exclusive(fn):
    """`fn` runs in a `session()`."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with session():
            return fn(*args, **kwargs)
    return run


def install() -> int:
    """Wrap z3's release functions (once, in every z3 module that binds them); the number
    wrapped."""
    originals = {name: f for name, f in vars(z3core).items()
                 if _releases(name) and callable(f) and not hasattr(f, _MARK)}
    wrapped = {name: _guarded(f) for name, f in originals.items()}
    # every z3 module that imported the functions by name (`from .z3core import *`) calls
    # its own binding: replace each binding of an original function
    for mod in [m for n, m in list(sys.modules.items()) if n == "z3" or n.startswith("z3.")]:
        space = vars(mod)
        for name in list(space):
            if name in originals and space[name] is originals[name]:
                space[name] = wrapped[name]
    return len(wrapped)


def guarded() -> bool:
    """Whether z3's releases go through the guard in every z3 module that binds them."""
    return all(hasattr(vars(m)[name], _MARK)
               for n, m in list(sys.modules.items()) if n == "z3" or n.startswith("z3.")
               for name in list(vars(m)) if _releases(name) and callable(vars(m)[name]))


install()

__all__ = ["LOCK", "exclusive", "guarded", "install", "session"]
