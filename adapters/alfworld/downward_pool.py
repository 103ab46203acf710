"""fast-downward's planner library, reused by the games of a process instead of leaked per game.

TextWorld's ``PddlEnv`` loads a private copy of ``libdownward.so`` (33 MB) for every engine it
builds: ``fast_downward.load_lib`` copies the file into a temporary folder, loads it and deletes
the folder, but a loaded library is never unloaded, so the deleted copy keeps its disk blocks
and its mapping until the process exits. A study or training process that starts an engine per
episode (names shuffled per reset, the planner's own engine per expert call) held tens of GB of
deleted files in ``/tmp`` and stopped with "No space left on device".

Each engine still gets a library no other live engine uses (the library holds one planning
problem in global state): when an engine is garbage-collected its library goes back to this
process's pool, and the next engine takes it instead of loading a new copy. Reuse is what
TextWorld does itself on every ``reset`` (``PddlState`` loads the problem into the engine's
library again), so a reused library starts each game as a fresh one does.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

_free: list[Any] = []
_lock = threading.Lock()
_loaded = 0  # libraries this process has loaded (a new copy each)
_original_init: Callable[..., None] | None = None


def loaded_libraries() -> int:
    """How many copies of the library this process has loaded since it started."""
    return _loaded


def _lease() -> Any:
    global _loaded
    with _lock:
        if _free:
            return _free.pop()
    import fast_downward  # the engine loads at the first game (see engine.start_engine)

    lib = fast_downward.load_lib()
    with _lock:
        _loaded += 1
    return lib


def _release(lib: Any) -> None:
    with _lock:
        _free.append(lib)


class _PooledDownward:
    """Stands in for the ``fast_downward`` module inside TextWorld's ``pddl`` module, whose only
    use of it is ``fast_downward.load_lib()`` in ``PddlEnv.__init__``."""

    def __init__(self, module: Any):
        self._module = module

    def load_lib(self) -> Any:
        return _lease()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def install() -> None:
    """Make every ``PddlEnv`` of this process lease its library from the pool (idempotent)."""
    global _original_init
    from textworld.envs.pddl import pddl  # the engine loads at the first game (see engine.start_engine)

    if _original_init is not None:
        return
    original = pddl.PddlEnv.__init__
    _original_init = original
    pddl.fast_downward = _PooledDownward(pddl.fast_downward)

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            original(self, *args, **kwargs)
        finally:
            lib = getattr(self, "downward_lib", None)
            if lib is not None:  # back to the pool when this engine is collected
                weakref.finalize(self, _release, lib)

    pddl.PddlEnv.__init__ = init
