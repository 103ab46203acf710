"""Leave the caller's process as it was: ``sys.argv``, the global ``random`` (and NumPy)
state, the working directory, environment variables, signal handlers and the logging
configuration are restored after an adapter calls into its engine.

Benchmark engines were written as programs, not libraries: ALFWorld's planner sets
``sys.argv`` to ``['translate.py', 'domain', 'task']``, ``alfworld.info`` sets
``$ALFWORLD_DATA`` on import. A user script that reads ``sys.argv[1]`` afterwards would
write to a file named ``domain``. Adapters wrap their engine calls in
``preserved_process_state()`` (or decorate methods with ``@preserves_process_state``).

Loggers first created inside the block (by a lazy import) are the importing library's,
not the caller's, and are left alone; every logger that existed before is restored.
"""

from __future__ import annotations

import _signal  # signal's C module: getsignal without the enum conversion (~20x cheaper)
import ctypes
import functools
import logging
import os
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["ProcessState", "preserved_process_state", "preserves_process_state"]

F = TypeVar("F", bound=Callable[..., Any])

#: environment variables a dependency needs set before its import and that may stay set
#: afterwards (each listed, with why, in docs/security.md); everything else is restored
DOCUMENTED_IMPORT_SETTINGS: dict[str, str] = {}
_UNCATCHABLE = {getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)}
_SIGNALS = tuple(int(s) for s in signal.valid_signals() if s not in _UNCATCHABLE)  # computed once: cheap per call


@dataclass
class _LoggerState:
    logger: logging.Logger
    level: int
    handlers: list[logging.Handler]
    propagate: bool
    disabled: bool


@dataclass
class ProcessState:
    """A snapshot of the process-global settings an engine could change."""

    argv_object: list[str]
    argv: list[str]
    python_random: Any
    numpy_random: _NumpyRandom | None
    cwd: str
    environ: dict[Any, Any]  # the encoded os.environ data
    signals: dict[int, Any]
    loggers: dict[str, _LoggerState]
    logging_disable: int

    @classmethod
    def capture(cls) -> ProcessState:
        numpy = sys.modules.get("numpy")
        return cls(
            argv_object=sys.argv,
            argv=list(sys.argv),
            python_random=random.getstate(),
            numpy_random=_NUMPY.capture(numpy) if numpy is not None else None,
            cwd=os.getcwd(),
            environ=_environ_snapshot(),
            signals=_signal_handlers(),
            loggers=_logger_states(),
            logging_disable=logging.root.manager.disable,
        )

    def restore(self) -> None:
        sys.argv = self.argv_object
        sys.argv[:] = self.argv
        random.setstate(self.python_random)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy_random is not None:
            _NUMPY.restore(numpy, self.numpy_random)
        if os.getcwd() != self.cwd:
            os.chdir(self.cwd)
        if _environ_snapshot() != self.environ:
            saved = {os.environ.decodekey(k): os.environ.decodevalue(v) for k, v in self.environ.items()}  # type: ignore[attr-defined]
            for key in set(os.environ) - set(saved):
                del os.environ[key]
            for key, value in saved.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for signum, handler in self.signals.items():
                if handler is not None and _signal.getsignal(signum) is not handler:
                    try:
                        signal.signal(signum, handler)
                    except (OSError, ValueError, TypeError):
                        pass
        manager = logging.root.manager
        levels_changed = False
        for state in self.loggers.values():  # the logger objects themselves: no getLogger lookups
            logger = state.logger
            if logger.level != state.level:  # setLevel would clear every logger's cache, per logger
                logger.level, levels_changed = state.level, True
            if logger.handlers != state.handlers:
                logger.handlers[:] = state.handlers
            logger.propagate = state.propagate
            logger.disabled = state.disabled
        if levels_changed:
            manager._clear_cache()
        if manager.disable != self.logging_disable:
            logging.disable(self.logging_disable)


@dataclass
class _NumpyRandom:
    """NumPy's global random state: the full ``get_state()`` tuple and the raw MT19937 words
    (key and position) it was read with, or ``b""`` where those cannot be read."""

    state: tuple[Any, ...]
    words: bytes


class _NumpyGlobalRandom:
    """Snapshots of NumPy's global generator that cost ~1 us instead of ~90 us when nothing
    drew from it. ``get_state()``/``set_state()`` copy the 624-word state through Python
    objects; the raw words (read through the generator's public ctypes interface) tell
    whether anything drew. The legacy Gaussian cache (``has_gauss``) can only be filled by a
    draw, which changes the words, so a state read with ``has_gauss == 0`` whose words have
    not changed is still the current state; one blind spot: a caller's ``set_state()`` to a
    state equal in its words but with a cached Gaussian is taken for the earlier state. Any
    other doubt (another generator or layout): the full path."""

    _WORDS = 624 * 4 + 4  # uint32 key[624]; int pos  (numpy's mt19937_state)

    def __init__(self) -> None:
        self._checked: object = None  # the bit generator whose layout was verified
        self._last: _NumpyRandom | None = None

    def _words(self, numpy: Any) -> bytes:
        try:
            bitgen = numpy.random.get_bit_generator()
            if bitgen is not self._checked:
                if type(bitgen).__name__ != "MT19937":
                    return b""
                state = numpy.random.get_state()
                raw = ctypes.string_at(bitgen.ctypes.state_address, self._WORDS)
                expected = state[1].astype("<u4").tobytes() + int(state[2]).to_bytes(4, "little", signed=True)
                if raw != expected:
                    return b""
                self._checked = bitgen
            return ctypes.string_at(bitgen.ctypes.state_address, self._WORDS)
        except Exception:  # another NumPy layout: the full path
            return b""

    def capture(self, numpy: Any) -> _NumpyRandom:
        words, last = self._words(numpy), self._last
        if words and last is not None and last.words == words and last.state[3] == 0:
            return last
        self._last = snapshot = _NumpyRandom(numpy.random.get_state(), words)
        return snapshot

    def restore(self, numpy: Any, saved: _NumpyRandom) -> None:
        if saved.words and saved.state[3] == 0 and self._words(numpy) == saved.words:
            return  # nothing drew: the state is still the saved one
        numpy.random.set_state(saved.state)
        self._last = saved if saved.words else None


_NUMPY = _NumpyGlobalRandom()


def _environ_snapshot() -> dict[Any, Any]:
    """``os.environ`` as the encoded mapping behind it (a plain dict copy: no decoding)."""
    data = getattr(os.environ, "_data", None)
    return data.copy() if type(data) is dict else {os.environ.encodekey(k): os.environ.encodevalue(v)  # type: ignore[attr-defined]
                                                    for k, v in os.environ.items()}


def _signal_handlers() -> dict[int, Any]:
    out = {}
    getsignal = _signal.getsignal
    for signum in _SIGNALS:
        try:
            out[signum] = getsignal(signum)
        except (OSError, ValueError):
            continue
    return out


def _logger_states() -> dict[str, _LoggerState]:
    loggers: dict[str, logging.Logger] = {"": logging.root}
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            loggers[name] = logger
    return {name: _LoggerState(lg, lg.level, list(lg.handlers), lg.propagate, lg.disabled) for name, lg in loggers.items()}


@contextmanager
def preserved_process_state() -> Iterator[ProcessState]:
    """Restore the process-global settings on exit, whether the block returned or raised."""
    state = ProcessState.capture()
    try:
        yield state
    finally:
        state.restore()


def preserves_process_state(method: F) -> F:
    """Decorator form of ``preserved_process_state`` for adapter methods."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with preserved_process_state():
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
