"""What the code shell's sandbox holds, read from outside it: its processes (CPU, resident
memory, threads), its private ``/tmp`` (a tmpfs: memory no process's RSS shows) and the outputs
folder it may write (disk).

Every reading is the host's own (``/proc`` and the file system), never the sandbox's word:
agent code runs in the shell and could patch anything the shell reports. ``Census`` is one
look; ``clear_folder`` empties a folder the sandbox wrote without following its links or
entering a mount point (the sandbox's ``/tmp`` holds the mount points of what bubblewrap binds
under ``/tmp``, such as the socket folders: those are left alone).
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.servers import CLOCK_TICKS

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
INODE_BYTES = 1024  # what a file costs the kernel in a tmpfs beyond its data (inode and dentry), counted
MAX_OUTPUT_ENTRIES = 10_000  # files and folders the outputs folder may hold; past it the walk stops


@dataclass(frozen=True)
class Proc:
    """One process, from one read of ``/proc/<pid>/stat``."""

    pid: int
    ppid: int
    state: str
    cpu_s: float
    rss_bytes: int


def _read_proc(pid: int) -> Proc | None:
    """One process from ``/proc/<pid>/stat`` (None once it is gone)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
        finally:
            os.close(fd)
        return Proc(pid, int(fields[1]), fields[0].decode(), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS,
                    int(fields[21]) * PAGE_BYTES)
    except (OSError, IndexError, ValueError):
        return None


def read_processes() -> dict[int, Proc]:
    """Every process on the machine (one pass over /proc)."""
    procs = (_read_proc(int(name)) for name in os.listdir("/proc") if name.isdigit())
    return {proc.pid: proc for proc in procs if proc is not None}


def _children(pid: int) -> list[int] | None:
    """The children of every thread of ``pid`` (``/proc/<pid>/task/<tid>/children``); None when
    the kernel does not list them (then the whole of /proc is read instead)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None  # no CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return found


def read_tree(root: int) -> dict[int, Proc] | None:
    """``root`` and its descendants, found through the kernel's lists of children: a handful of
    reads for a sandbox, where one pass over /proc reads every process of the machine (hundreds
    on a training host, twice a step). None when the kernel keeps no such lists."""
    procs: dict[int, Proc] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        proc = _read_proc(pid)
        if proc is None or pid in procs:
            continue
        procs[pid] = proc
        children = _children(pid)
        if children is None:
            return None
        todo += children
    return procs


def process_tree(root: int, procs: dict[int, Proc]) -> list[int]:
    """``root`` and its descendants, parents before children ([] once ``root`` is gone); a
    process of a bubblewrap sandbox is a descendant of its ``bwrap`` (the sandbox's init adopts orphans)."""
    if root not in procs:
        return []
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        todo.extend(sorted(children.get(pid, ())))
    return tree


def thread_ids(pid: int) -> frozenset[int]:
    """The threads of ``pid`` (empty once it is gone)."""
    try:
        return frozenset(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (OSError, ValueError):
        return frozenset()


def tmpfs_bytes(path: str | Path) -> int | None:
    """What a tmpfs holds: its used blocks plus ``INODE_BYTES`` per file (None when unreadable)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize + (st.f_files - st.f_ffree) * INODE_BYTES


def folder_usage(root: Path, stop_bytes: int | None = None) -> tuple[int, int]:
    """(bytes on disk, entries) under ``root``, links not followed; the walk stops once past
    ``stop_bytes`` or ``MAX_OUTPUT_ENTRIES`` (a folder of a million files is not walked to its end)."""
    used = entries = 0
    todo = [str(root)]
    while todo:
        try:
            scan = os.scandir(todo.pop())
        except OSError:
            continue
        with scan:
            for entry in scan:
                entries += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    todo.append(entry.path)
                if entries > MAX_OUTPUT_ENTRIES or (stop_bytes is not None and used > stop_bytes):
                    return used, entries
    return used, entries


def clear_folder(root: str | Path) -> list[str]:
    """Remove everything under ``root`` on ``root``'s own file system: links are removed, never
    followed; a mount point (another file system) is neither entered nor removed, nor the folders
    holding one. Returns what could not be removed (mount points and their parents)."""
    root = str(root)
    try:
        device = os.lstat(root).st_dev
    except OSError:
        return []
    kept: list[str] = []
    _clear(root, device, kept)
    return kept


def _clear(folder: str, device: int, kept: list[str]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        kept.append(folder)
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_dev != device:  # a mount point: bound in by the sandbox, not the code's
            kept.append(entry.path)
            continue
        if stat.S_ISDIR(info.st_mode):
            before = len(kept)
            _clear(entry.path, device, kept)
            if len(kept) == before:
                try:
                    os.rmdir(entry.path)
                except OSError:
                    kept.append(entry.path)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                kept.append(entry.path)


class Trash:
    """A folder that what is thrown away is renamed into (instant) and removed from by a
    background thread: removing a folder costs milliseconds on some disks (3 ms each here), and
    an episode's outputs are half a dozen folders. ``path`` must be on the same file system as
    what is thrown away; ``remove`` deletes it."""

    def __init__(self, path: Path):
        self.path = path
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def take(self, paths: Iterable[Path]) -> None:
        with self._lock:
            moved = False
            for path in paths:
                self.path.mkdir(exist_ok=True)
                try:
                    os.rename(path, self.path / str(next(self._names)))  # a link is moved, never followed
                    moved = True
                except OSError:  # not movable: removed here
                    _remove(path)
            if moved and self._thread is None:
                self._thread = threading.Thread(target=self._drain, daemon=True, name="appworld-trash")
                self._thread.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                try:
                    entries = [Path(entry.path) for entry in os.scandir(self.path)]
                except OSError:
                    entries = []
                if not entries:
                    self._thread = None
                    return
            removed = sum(_remove(path) for path in entries)  # each one tried
            if not removed:  # nothing could be removed: left to remove()
                with self._lock:
                    self._thread = None
                return

    def remove(self) -> None:
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)
        shutil.rmtree(self.path, ignore_errors=True)


def _remove(path: Path) -> bool:
    """Remove ``path`` (a folder with what it holds, on its own file system; a link itself)."""
    try:
        if path.is_dir() and not path.is_symlink():
            clear_folder(path)
            os.rmdir(path)
        else:
            os.unlink(path)
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Census:
    """One look at a sandbox: its live processes (zombies hold nothing and are left out), their
    CPU and resident memory, its ``/tmp`` and its outputs folder."""

    pids: tuple[int, ...] = ()
    cpu_s: float = 0.0
    rss_bytes: int = 0
    tmp_bytes: int = 0
    outputs_bytes: int = 0
    outputs_entries: int = 0
    threads: frozenset[int] = field(default_factory=frozenset)  # the server process's

    @property
    def memory_bytes(self) -> int:
        """What the sandbox holds in memory: its processes' resident sets and its ``/tmp``."""
        return self.rss_bytes + self.tmp_bytes

    def extra_pids(self, own: Iterable[int]) -> list[int]:
        """Processes that are not the sandbox's own (bwrap, its init, the server): the code's."""
        own = set(own)
        return [pid for pid in self.pids if pid not in own]

    def describe(self) -> str:
        gb = 1024**3
        return (f"{len(self.pids)} processes holding {self.rss_bytes / gb:.2f} GB, /tmp {self.tmp_bytes / gb:.2f} GB, "
                f"outputs {self.outputs_bytes / 1024**2:.0f} MB in {self.outputs_entries} entries")


def take_census(root: int, server_pid: int | None, outputs: Path | None, outputs_stop_bytes: int | None = None,
                procs: dict[int, Proc] | None = None) -> Census | None:
    """A census of the sandbox whose ``bwrap`` is ``root`` (None once it is gone). ``server_pid``:
    the shell's process inside it (its threads are listed, its ``/proc/<pid>/root/tmp`` read:
    the sandbox's own ``/tmp``, which the host may read as the namespace's owner)."""
    if procs is None:
        tree = read_tree(root)
        procs = tree if tree is not None else read_processes()
    whole = process_tree(root, procs)  # zombies too: their CPU time counts until they are reaped
    tree = [pid for pid in whole if procs[pid].state not in ("Z", "X")]
    if not tree:
        return None
    inside = server_pid if server_pid in tree else (tree[1] if len(tree) > 1 else None)
    tmp = tmpfs_bytes(f"/proc/{inside}/root/tmp") if inside is not None else None
    used, entries = folder_usage(outputs, outputs_stop_bytes) if outputs is not None else (0, 0)
    return Census(pids=tuple(tree), cpu_s=sum(procs[pid].cpu_s for pid in whole),
                  rss_bytes=sum(procs[pid].rss_bytes for pid in tree), tmp_bytes=tmp or 0,
                  outputs_bytes=used, outputs_entries=entries,
                  threads=thread_ids(server_pid) if server_pid is not None else frozenset())
