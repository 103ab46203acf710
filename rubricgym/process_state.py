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

F = TypeVar("F", bound=Callable[..., Any])

#: environment variables a dependency needs set before its import and that may stay set
#: afterwards (each listed, with why, in docs/security.md); everything else is restored
DOCUMENTED_IMPORT_SETTINGS: dict[str, str] = {}
_UNCATCHABLE = {getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)}
_SIGNALS = tuple(int(s) for s in signal.valid_signals() if s not in _UNCATCHABLE)  # computed once: cheap per call


@dataclass
class _LoggerState:
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
    numpy_random: Any
    cwd: str
    environ: dict[str, str]
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
            numpy_random=numpy.random.get_state() if numpy is not None else None,
            cwd=os.getcwd(),
            environ=dict(os.environ),
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
            numpy.random.set_state(self.numpy_random)
        if os.getcwd() != self.cwd:
            os.chdir(self.cwd)
        if dict(os.environ) != self.environ:
            for key in set(os.environ) - set(self.environ):
                del os.environ[key]
            for key, value in self.environ.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for signum, handler in self.signals.items():
                if handler is not None and signal.getsignal(signum) is not handler:
                    try:
                        signal.signal(signum, handler)
                    except (OSError, ValueError, TypeError):
                        pass
        manager = logging.root.manager
        for name, state in self.loggers.items():
            logger = logging.getLogger(name) if name else logging.root
            if isinstance(logger, logging.Logger):
                logger.setLevel(state.level)
                logger.handlers[:] = state.handlers
                logger.propagate = state.propagate
                logger.disabled = state.disabled
        if manager.disable != self.logging_disable:
            logging.disable(self.logging_disable)


def _signal_handlers() -> dict[int, Any]:
    out = {}
    for signum in _SIGNALS:
        try:
            out[signum] = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
    return out


def _logger_states() -> dict[str, _LoggerState]:
    loggers: dict[str, logging.Logger] = {"": logging.root}
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            loggers[name] = logger
    return {name: _LoggerState(lg.level, list(lg.handlers), lg.propagate, lg.disabled) for name, lg in loggers.items()}


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
