"""The studies' worker processes: spawned, and gone when the study process is.

A study's worker writes its run's files into the study folder. A worker that outlived a study
stopped by SIGTERM or SIGKILL (only the study process gets the signal; Ctrl-C reaches the whole
process group) kept training and writing there, into the runs of the next study started in the
same folder. On Linux each worker asks the kernel to send it SIGTERM when the study process
exits (``prctl(PR_SET_PDEATHSIG)``); on every platform it exits at once if the study is already
gone when it starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _start_worker(study_pid: int, initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != study_pid:  # the study exited before the kernel was asked to tell us
        os._exit(1)
    if initializer is not None:
        initializer(*initargs)


def study_pool(jobs: int, initializer: Callable[..., None] | None = None,
               initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """``jobs`` spawned workers (torch and the engines are not fork-safe once loaded) that stop
    with the study. Create and submit to it from the study's main thread: the kernel ties the
    signal to the thread that started the worker."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(os.getpid(), initializer, initargs))
