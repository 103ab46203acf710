"""Reading a run folder back for a resume (the metrics log, the run's config), writing
into one without following links, naming the (estimator, seed) runs of a study and
forking a new run from another run's checkpoint.

Both may have been cut short by a crash (a kill mid-``write``) or damaged since. A partial
last metrics line is cut (it belongs to an iteration that is redone); a broken
``config.yaml`` is replaced by the config stored in the newest intact checkpoint. Each
warning and each refusal names the file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rubricgym.jsonl import iter_json_lines
from rubricgym.secret_refs import redact
from rubricgym.trainers.checkpoint import CheckpointError, atomic_write_text, newest_intact
from rubricgym.trainers.config import TrainConfig, load_config

log = logging.getLogger(__name__)

_SEED_RUN = re.compile(r"^(?P<label>.+)-seed(?P<seed>\d+)$")


def seed_run_name(label: str, seed: int) -> str:
    """The name of one (estimator, seed) run of a study or a seed benchmark: ``trca-seed3``.
    Its folder (or file stem) carries it, and ``parse_seed_run_name`` reads it back."""
    return f"{label}-seed{seed}"


def parse_seed_run_name(name: str) -> tuple[str, int] | None:
    """``(label, seed)`` of a ``seed_run_name``; None for any other name."""
    match = _SEED_RUN.match(name)
    return (match["label"], int(match["seed"])) if match else None


def fork_run(source: Path, checkpoint: Path, dest: Path, files: Sequence[str] = ("config.yaml",)) -> Path:
    """A new run folder ``dest`` that starts where ``checkpoint`` (a checkpoint folder of the
    run ``source``) left off: ``files`` of ``source`` and the checkpoint are copied, so
    ``Trainer.from_run_dir(dest, overrides)`` resumes from it with its own settings. Whatever
    ``dest`` held is replaced. The source run is only read."""
    source, checkpoint, dest = Path(source), Path(checkpoint), Path(dest)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in files:
        shutil.copy2(source / name, dest / name)
    shutil.copytree(checkpoint, dest / checkpoint.name)
    return dest


def read_metrics_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a metrics log, one per line. A line that is not a JSON object
    (the partial last line of a killed run, or damage) is skipped with a warning naming
    ``path:line``."""
    path = Path(path)
    if not path.exists():
        return []
    out, problems = [], []
    for number, value in iter_json_lines(path, what="a metrics record", errors="skip", problems=problems):
        if not isinstance(value.get("iteration", 0), int):
            problems.append(f"{path.name}:{number}: not a metrics record (no integer iteration), skipped")
            continue
        out.append(value)
    for problem in problems:  # "metrics.jsonl:7: not a metrics record (...), skipped"
        log.warning("%s", path.parent / problem)
    return out


def cut_metrics(path: Path, iteration: int) -> int:
    """Keep the records of iterations ``<= iteration`` (later ones are redone after a
    resume), drop partial lines; rewrite atomically. Returns the records kept."""
    path = Path(path)
    if not path.exists():
        return 0
    kept = [m for m in read_metrics_lines(path) if int(m.get("iteration", 0)) <= iteration]
    atomic_write_text(path, "".join(json.dumps(m, sort_keys=True) + "\n" for m in kept))
    return len(kept)


def load_run_config(run_dir: Path, config_file: str, overrides: list[str] | None = None) -> TrainConfig:
    """The run's own config (``config_file`` in ``run_dir``) plus overrides. When that file
    is missing or broken, the config saved in the newest intact checkpoint is used, with a
    warning naming the file; with neither, a ``CheckpointError`` names both."""
    run_dir = Path(run_dir)
    path = run_dir / config_file
    try:
        load_config(path)  # the file alone: is it damaged? (a bad --set is reported as it is, below)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValidationError, ValueError, RecursionError) as exc:
        problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    else:
        return load_config(path, overrides)
    loaded, skipped = newest_intact(run_dir, move_aside=False)
    if loaded is None:
        extra = f"; checkpoints: {'; '.join(skipped)}" if skipped else "; no checkpoint holds a copy"
        raise CheckpointError(path, f"cannot be read ({problem}){extra}")
    log.warning("%s cannot be read (%s); using the config saved in %s", path, problem, loaded.path / "trainer_state.json")
    try:
        return load_config(None, overrides, base=loaded.state.config)
    except ValidationError as exc:
        raise CheckpointError(loaded.path / "trainer_state.json", f"holds an invalid config ({exc.errors()[0]['msg']})") from None



def links_leading_outside(run_dir: Path) -> list[str]:
    """``"name -> target"`` for every symbolic link under ``run_dir`` whose target is not
    inside it (links are not followed while looking)."""
    root = Path(run_dir).resolve()
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                found.append(f"{path.relative_to(root)} -> {os.readlink(path)}")
    return sorted(found)


def refuse_links_outside(run_dir: Path) -> None:
    """``CheckpointError`` when the run folder holds links leading outside it: the trainer
    writes its files in place, and a link would send those writes elsewhere."""
    links = links_leading_outside(run_dir)
    if links:
        shown = "; ".join(links[:5]) + (f"; and {len(links) - 5} more" if len(links) > 5 else "")
        raise CheckpointError(run_dir, f"holds links leading outside the run folder ({shown}); the run writes "
                                       "its files in place and would write through them: remove the links")


def write_run_file(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (temporary file, then rename; keys read by this process
    redacted by ``atomic_write_text``): a link at ``path`` is replaced, never written through."""
    atomic_write_text(path, text)


def append_run_line(path: Path, line: str) -> None:
    """Append one line to ``path`` (keys read by this process redacted); a link at ``path``
    is an error (``O_NOFOLLOW``), never followed. The line goes out in one ``write`` (a
    buffered file would split a long line into several), so a process killed while appending
    leaves at most a partial last line, which ``drop_partial_line`` removes. Content cannot
    make it fail: a character UTF-8 cannot encode is written as its backslash escape."""
    data = memoryview((redact(line) + "\n").encode("utf-8", errors="backslashreplace"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def drop_partial_line(path: Path) -> bool:
    """Cut a last line without its newline (a writer killed mid-append) from an append-only
    file; True when something was cut. Every complete line stays as it was."""
    if not path.is_file():
        return False
    with open(path, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return False
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return False
        keep, position, chunk = 0, size, 1 << 16
        while position > 0:
            start = max(0, position - chunk)
            fh.seek(start)
            found = fh.read(position - start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            position = start
        fh.truncate(keep)
    return True
