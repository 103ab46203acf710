"""The apps process (``serve_apps.py``): AppWorld's apps and the world's databases, outside the
code shell's sandbox, in a sandbox of its own, reached over two Unix sockets.

Its folder of sockets (``<tmp>/rubricgym-aw-<pid>-XXXX``) has one folder per channel, so each
sandbox is given exactly the channels it may use: ``shell/`` (rubricgym to the code shell),
``apis/`` (the code shell to the apps), ``control/`` (rubricgym and the evaluator to the apps).
One more folder, ``task/``, is no channel: the code shell's sandbox shows it read-only as the
data root's ``data/tasks``, and the env puts only the current task's folder in it (``show_task``).
The folders stay while the processes restart (the evaluator's sandbox keeps its view of
``control/``); ``remove`` deletes them, and a folder whose owner died is swept at the next start.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rubricgym.adapters.appworld.sandbox import apps_sandbox
from rubricgym.adapters.appworld.usage import clear_folder
from rubricgym.servers import ServerProcess, sweep_stale

SERVE_APPS_SCRIPT = Path(__file__).with_name("serve_apps.py")
SOCKET_PREFIX = "rubricgym-aw-"  # <tmp>/rubricgym-aw-<pid>-XXXX/<channel>/s.sock: short (108 bytes at most)
CHANNELS = ("shell", "apis", "control")
TASK_VIEW = "task"  # the current task's folder, as the code shell sees it
HIDDEN_IN_TASK_VIEW = ("ground_truth", "dbs")  # the answer; start-state databases (the apps' process has them)


@dataclass(frozen=True)
class Sockets:
    """One server's socket folders; ``create`` makes them, ``remove`` deletes them."""

    root: Path

    @classmethod
    def create(cls) -> Sockets:
        sweep_stale(tempfile.gettempdir(), SOCKET_PREFIX)
        sockets = cls(Path(tempfile.mkdtemp(prefix=f"{SOCKET_PREFIX}{os.getpid()}-")))
        for channel in (*CHANNELS, TASK_VIEW):
            (sockets.root / channel).mkdir(mode=0o700)
        return sockets

    def path(self, channel: str) -> Path:
        return self.root / channel / "s.sock"

    @property
    def task_view(self) -> Path:
        return self.root / TASK_VIEW

    def show_task(self, data_root: Path, task_id: str) -> None:
        """Put only ``task_id``'s folder in the task view (a copy, without ground truth or
        databases). The previous task's folder is renamed and refilled: removing a folder costs
        milliseconds on some disks."""
        source = data_root / "data" / "tasks" / task_id
        target = self.task_view / task_id
        shown = list(self.task_view.iterdir())
        if len(shown) == 1 and shown[0].is_dir() and not shown[0].is_symlink():
            if shown[0] != target:
                os.rename(shown[0], target)
            clear_folder(target)
        else:
            clear_folder(self.task_view)
            target.mkdir()
        for item in source.iterdir():
            if item.name in HIDDEN_IN_TASK_VIEW:
                continue
            if item.is_dir() and not item.is_symlink():
                shutil.copytree(item, target / item.name, symlinks=True)
            else:
                shutil.copy2(item, target / item.name, follow_symlinks=False)

    def clear(self) -> None:
        """Unlink the sockets (a restarted process binds them afresh)."""
        for channel in CHANNELS:
            self.path(channel).unlink(missing_ok=True)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class AppsProcess:
    """``serve_apps.py`` in its sandbox: started, watched and killed with the code shell."""

    def __init__(self, bwrap: str, python: Path, data_root: Path, sockets: Sockets, memory_cap_bytes: int | None):
        self.sandbox = apps_sandbox(bwrap, python, [SERVE_APPS_SCRIPT], data_root,
                                    [sockets.root / "apis", sockets.root / "control"])
        self.command = self.sandbox.command([str(python), str(SERVE_APPS_SCRIPT), "--apis-uds",
                                             str(sockets.path("apis")), "--control-uds",
                                             str(sockets.path("control")), "--root", str(data_root)])
        self.memory_cap_bytes, self.cwd = memory_cap_bytes, data_root
        self.process: ServerProcess | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def start(self) -> None:
        self.kill()
        # bwrap (the sandbox's PID 1) starts with an empty environment; the server's is set by --setenv
        self.process = ServerProcess(self.command, env={}, cwd=self.cwd, log_prefix="appworld-apps-",
                                     memory_cap_bytes=self.memory_cap_bytes, new_session=True)
        self.process.start()

    def log_tail(self, chars: int = 3000) -> str:
        return self.process.log_tail(chars) if self.process is not None else ""

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process = None
