"""Checkpoints that resume exactly, and that never execute anything when read.

A checkpoint is a folder ``checkpoint-<iteration>``::

    adapter/adapter_model.safetensors   LoRA weights (peft's own file)
    kl_reference.safetensors            the KL term's reference adapter, when a warm start
                                        made it (peft's saved keys; trainers/reference.py)
    tensors.safetensors                 optimizer state tensors, torch / CUDA RNG states
    trainer_state.json                  counters, optimizer settings, scheduler, Python and
                                        NumPy RNG states, the run's config and its hash
    manifest.json                       SHA-256 and size of every file above (written last)

Nothing is pickled: tensors go through safetensors (a length-prefixed JSON header and raw
bytes) and everything else through JSON validated by pydantic. A file from elsewhere is
therefore data, never code; a pickled ``trainer_state.pt`` (older rubricgym) is refused
without being opened. The folder is written under a temporary name, flushed to disk and
renamed into place, so a crash leaves the previous checkpoint as the latest. On resume
every file is checked against the manifest; a bad checkpoint is moved aside (renamed
``*.corrupt``) with a warning naming the bad file, and the newest intact one is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from rubricgym.atomic_files import atomic_write_text
from rubricgym.trainers.distributed import snapshot_tensors
from rubricgym.trainers.parallel.base import ParallelStrategy
from rubricgym.trainers.parallel.choose import single_process
from rubricgym.trainers.reference import KLReference

log = logging.getLogger(__name__)

PREFIX = "checkpoint-"
ADAPTER_DIR = "adapter"
ADAPTER_FILE = f"{ADAPTER_DIR}/adapter_model.safetensors"
TENSORS_FILE = "tensors.safetensors"
REFERENCE_FILE = "kl_reference.safetensors"
STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
LEGACY_PICKLE = "trainer_state.pt"
FORMAT = "rubricgym-checkpoint"
VERSION = 1
MAX_JSON_BYTES = 64 * 2**20  # a trainer state is a few hundred KB; anything bigger is not ours
_NAME = re.compile(rf"^{PREFIX}(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and why."""

    def __init__(self, path: Path | str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


# ---- the files' typed contents -----------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ManifestEntry(_Strict):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class Manifest(_Strict):
    format: str
    version: int
    iteration: int = Field(ge=0)
    files: dict[str, ManifestEntry]


UInt32 = Annotated[int, Field(ge=0, le=2**32 - 1)]


class PythonRandomState(_Strict):
    version: int
    internal: list[UInt32] = Field(min_length=625, max_length=625)
    gauss_next: float | None


class NumpyRandomState(_Strict):
    algorithm: str
    keys: list[UInt32] = Field(min_length=624, max_length=624)
    position: int = Field(ge=0, le=624)
    has_gauss: int
    cached_gaussian: float


class RankRandomState(_Strict):
    """The RNG state of one rank > 0 of a several-process run."""

    rank: int = Field(ge=1)
    python_random: PythonRandomState
    numpy_random: NumpyRandomState
    cuda_rng_devices: int = Field(0, ge=0)


class TrainerState(_Strict):
    iteration: int = Field(ge=0)
    data_position: int = Field(ge=0)
    warmup_done: bool = False
    config: dict[str, Any]
    config_sha256: str
    optimizer_param_groups: list[dict[str, Any]]
    optimizer_scalars: dict[str, dict[str, Any]] = Field(default_factory=dict)
    scheduler: dict[str, Any] | None
    python_random: PythonRandomState
    numpy_random: NumpyRandomState
    cuda_rng_devices: int = Field(0, ge=0)
    # several processes: rank 0's state is above; every other rank's is here (its torch/CUDA
    # states are the tensors ``rng/rank/<r>/torch`` and ``rng/rank/<r>/cuda/<i>``)
    world_size: int = Field(1, ge=1)
    rank_random: list[RankRandomState] = Field(default_factory=list)
    loss_scale: dict[str, float] | None = None  # fp16: the loss scaler's state (ParallelStrategy.loss_scale_state)


@dataclass
class Restored:
    """What a resume needs besides the restored objects."""

    path: Path
    state: TrainerState
    skipped: list[str] = field(default_factory=list)  # "<file>: <reason>" of newer, bad checkpoints

    @property
    def iteration(self) -> int:
        return self.state.iteration

    @property
    def data_position(self) -> int:
        return self.state.data_position

    @property
    def warmup_done(self) -> bool:
        return self.state.warmup_done


# ---- small file helpers ----------------------------------------------------------------
def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode("utf-8")).hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_json_file(path: Path, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """JSON from a file we did not necessarily write: bounded size and nesting, every
    failure a ``CheckpointError`` naming the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointError(path, f"cannot be read ({exc.strerror or exc})") from None
    if size > max_bytes:
        raise CheckpointError(path, f"is {size} bytes, over the {max_bytes}-byte limit")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(path, f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise CheckpointError(path, "is nested too deeply to be a checkpoint file") from None


# ---- RNG and optimizer state to (JSON, tensors) -----------------------------------------
def _rng_json() -> tuple[PythonRandomState, NumpyRandomState]:
    version, internal, gauss = random.getstate()
    algorithm, keys, position, has_gauss, cached = np.random.get_state()
    return (PythonRandomState(version=version, internal=list(internal), gauss_next=gauss),
            NumpyRandomState(algorithm=str(algorithm), keys=[int(k) for k in keys], position=int(position),
                             has_gauss=int(has_gauss), cached_gaussian=float(cached)))


def _set_rng(state: TrainerState, tensors: dict[str, torch.Tensor]) -> None:
    py = state.python_random
    random.setstate((py.version, tuple(py.internal), py.gauss_next))
    nq = state.numpy_random
    np.random.set_state((nq.algorithm, np.array(nq.keys, dtype=np.uint32), nq.position, nq.has_gauss,
                         nq.cached_gaussian))
    torch.set_rng_state(tensors["rng/torch"])
    if state.cuda_rng_devices and torch.cuda.is_available():
        count = min(state.cuda_rng_devices, torch.cuda.device_count())
        torch.cuda.set_rng_state_all([tensors[f"rng/cuda/{i}"] for i in range(count)])


def _rank_random(snapshots: dict[int, dict[str, Any]]) -> tuple[list[RankRandomState], dict[str, torch.Tensor]]:
    """Other ranks' RNG snapshots (``trainers.distributed.rng_snapshot``) as typed JSON and tensors."""

    entries, tensors = [], {}
    for rank, snap in sorted(snapshots.items()):
        states = snapshot_tensors(snap)
        for name, value in states.items():
            tensors[f"rng/rank/{rank}/{name}"] = value
        entries.append(RankRandomState(rank=rank, python_random=PythonRandomState(**snap["python"]),
                                       numpy_random=NumpyRandomState(**snap["numpy"]),
                                       cuda_rng_devices=len(snap.get("cuda", []))))
    return entries, tensors


def _set_rank_rng(state: TrainerState, tensors: dict[str, torch.Tensor], rank: int) -> None:
    """Rank ``rank``'s (> 0) saved RNG state; a rank the checkpoint has none for (a run
    resumed on more processes) keeps its seeded state, with a warning."""
    entry = next((e for e in state.rank_random if e.rank == rank), None)
    if entry is None:
        log.warning("the checkpoint (saved by %d process(es)) has no RNG state for rank %d; it keeps its seeded "
                    "state", state.world_size, rank)
        return
    py, nq = entry.python_random, entry.numpy_random
    random.setstate((py.version, tuple(py.internal), py.gauss_next))
    np.random.set_state((nq.algorithm, np.array(nq.keys, dtype=np.uint32), nq.position, nq.has_gauss,
                         nq.cached_gaussian))
    torch.set_rng_state(tensors[f"rng/rank/{rank}/torch"])
    if entry.cuda_rng_devices and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors[f"rng/rank/{rank}/cuda/0"])


def _json_value(value: Any, where: str) -> Any:
    if isinstance(value, tuple):
        return [_json_value(v, where) for v in value]
    if isinstance(value, list):
        return [_json_value(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v, where) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    raise TypeError(f"{where}: a {type(value).__name__} cannot be stored without pickle")


def _split_optimizer(sd: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, torch.Tensor]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, entry in sd["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer/{pid}/{name}"] = value.detach().to("cpu").contiguous().clone()
            else:
                scalars.setdefault(str(pid), {})[name] = _json_value(value, f"optimizer state {pid}.{name}")
    groups = [_json_value(g, "optimizer param_groups") for g in sd["param_groups"]]
    return groups, scalars, tensors


def _optimizer_state_dict(state: TrainerState, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    per_param: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            _, pid, name = key.split("/", 2)
            per_param.setdefault(int(pid), {})[name] = value
    for pid, values in state.optimizer_scalars.items():
        per_param.setdefault(int(pid), {}).update(values)
    groups = []
    for group in state.optimizer_param_groups:
        group = dict(group)
        if isinstance(group.get("betas"), list):
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    return {"state": per_param, "param_groups": groups}


# ---- write -------------------------------------------------------------------------------
def save_checkpoint(run_dir: Path, iteration: int, model: Any, optimizer: Any, scheduler: Any,
                    extra: dict[str, Any], keep: int = 2, world_size: int = 1,
                    rank_rng: dict[int, dict[str, Any]] | None = None,
                    adapter_state: dict[str, torch.Tensor] | None = None,
                    optimizer_state: dict[str, Any] | None = None,
                    reference_state: dict[str, torch.Tensor] | None = None) -> Path:
    """Write ``checkpoint-<iteration>`` atomically (temporary folder, fsync, manifest last,
    rename) and keep the newest ``keep``. ``extra``: ``data_position``, ``warmup_done``,
    ``config`` (JSON-able; never secrets - the config refuses them). Several processes: rank
    0 writes (its adapter and optimizer state are every rank's) and ``rank_rng`` holds the
    other ranks' RNG snapshots (``trainers.distributed.rng_snapshot``). A partitioned model or
    optimizer passes its whole tensors, gathered by every rank (``ParallelStrategy.full_*``):
    ``adapter_state`` (by parameter name) and ``optimizer_state``. ``reference_state``: the KL
    reference's adapter (``KLReference.state``), None while the reference is the base."""
    run_dir = Path(run_dir)
    final = run_dir / f"{PREFIX}{iteration:06d}"
    groups, scalars, tensors = _split_optimizer(optimizer_state or optimizer.state_dict())
    tensors["rng/torch"] = torch.get_rng_state().contiguous()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    for i, st in enumerate(cuda):
        tensors[f"rng/cuda/{i}"] = st.contiguous()
    py, nq = _rng_json()
    others, other_tensors = _rank_random(rank_rng or {})
    tensors.update(other_tensors)
    config = extra.get("config", {})
    state = TrainerState(iteration=iteration, data_position=int(extra.get("data_position", 0)),
                         warmup_done=bool(extra.get("warmup_done", False)), config=config,
                         config_sha256=config_hash(config), optimizer_param_groups=groups,
                         optimizer_scalars=scalars,
                         scheduler=_json_value(scheduler.state_dict(), "scheduler") if scheduler is not None else None,
                         python_random=py, numpy_random=nq, cuda_rng_devices=len(cuda), world_size=world_size,
                         rank_random=others, loss_scale=extra.get("loss_scale"))
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=run_dir))
    try:
        model.save_pretrained(str(tmp / ADAPTER_DIR), state_dict=adapter_state)
        save_file(tensors, str(tmp / TENSORS_FILE))
        if reference_state is not None:
            save_file(reference_state, str(tmp / REFERENCE_FILE))
        (tmp / STATE_FILE).write_text(state.model_dump_json(), encoding="utf-8")
        files = {}
        for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
            rel = path.relative_to(tmp).as_posix()
            files[rel] = ManifestEntry(sha256=sha256_file(path), bytes=path.stat().st_size)
        manifest = Manifest(format=FORMAT, version=VERSION, iteration=iteration, files=files)
        atomic_write_text(tmp / MANIFEST_FILE, manifest.model_dump_json(indent=1))
        _fsync_dir(tmp / ADAPTER_DIR)
        _fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(run_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


# ---- find and verify ---------------------------------------------------------------------
def list_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint folders, oldest first (temporary ``.checkpoint-*`` and ``*.corrupt``
    folders are not checkpoints). Use ``verify_checkpoint`` before trusting one."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [p for p in run_dir.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))  # type: ignore[union-attr]


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def verify_checkpoint(path: Path) -> Manifest:
    """Check every file of a checkpoint against its manifest; raise ``CheckpointError``
    naming the first bad file. Reads bytes only (hashes), never interprets them."""
    path = Path(path)
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.is_file():
        if (path / LEGACY_PICKLE).exists():
            raise CheckpointError(path / LEGACY_PICKLE, "is a pickled trainer state (older rubricgym or a file from "
                                  "elsewhere); pickles are never loaded - retrain or convert it with the version "
                                  "that wrote it")
        raise CheckpointError(manifest_path, "is missing (the checkpoint was never completed)")
    try:
        manifest = Manifest.model_validate(read_json_file(manifest_path, max_bytes=1 << 20))
    except ValidationError as exc:
        raise CheckpointError(manifest_path, f"is not a checkpoint manifest ({_first_error(exc)})") from None
    if manifest.format != FORMAT or manifest.version != VERSION:
        raise CheckpointError(manifest_path, f"has format {manifest.format!r} v{manifest.version}; "
                                             f"this rubricgym reads {FORMAT!r} v{VERSION}")
    for required in (ADAPTER_FILE, TENSORS_FILE, STATE_FILE):
        if required not in manifest.files:
            raise CheckpointError(path / required, f"is not listed in {MANIFEST_FILE}")
    root = path.resolve()
    for rel, entry in manifest.files.items():
        target = (path / rel).resolve()
        if root not in target.parents:
            raise CheckpointError(manifest_path, f"names {rel!r}, outside the checkpoint folder")
        if not target.is_file():
            raise CheckpointError(path / rel, "is missing")
        size = target.stat().st_size
        if size != entry.bytes:
            raise CheckpointError(path / rel, f"has {size} bytes; the manifest says {entry.bytes}")
        if sha256_file(target) != entry.sha256:
            raise CheckpointError(path / rel, "does not match its SHA-256 in the manifest (damaged or altered)")
    return manifest


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'top level'}: {err['msg']}"


def _load_tensors(path: Path) -> dict[str, torch.Tensor]:

    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(path, f"is not a readable safetensors file ({str(exc)[:200]})") from None


@dataclass
class _Loaded:
    path: Path
    state: TrainerState
    tensors: dict[str, torch.Tensor]
    adapter: dict[str, torch.Tensor]
    reference: dict[str, torch.Tensor] | None = None


def read_checkpoint(path: Path) -> _Loaded:
    """Verify and parse one checkpoint without touching any live object."""
    path = Path(path)
    manifest = verify_checkpoint(path)
    try:
        state = TrainerState.model_validate(read_json_file(path / STATE_FILE))
    except ValidationError as exc:
        raise CheckpointError(path / STATE_FILE, f"is not a trainer state ({_first_error(exc)})") from None
    if config_hash(state.config) != state.config_sha256:
        raise CheckpointError(path / STATE_FILE, "its config does not match its config hash")
    tensors = _load_tensors(path / TENSORS_FILE)
    if "rng/torch" not in tensors:
        raise CheckpointError(path / TENSORS_FILE, "has no torch RNG state")
    # only what the manifest vouches for: a stray file dropped in later is never read
    reference = _load_tensors(path / REFERENCE_FILE) if REFERENCE_FILE in manifest.files else None
    return _Loaded(path, state, tensors, _load_tensors(path / ADAPTER_FILE), reference)


def read_state(path: Path) -> TrainerState:
    """The JSON trainer state of a verified checkpoint (config, counters)."""
    return read_checkpoint(path).state


def newest_intact(run_dir: Path, move_aside: bool = True) -> tuple[_Loaded | None, list[str]]:
    """The newest checkpoint that verifies and parses, and a "<file>: <reason>" line for
    every newer one that does not. With ``move_aside``, once an intact one is found the
    damaged newer ones are renamed ``<name>.corrupt`` (kept for inspection, never picked
    again, never pruned in place of a good one); with none intact nothing is moved."""
    skipped: list[str] = []
    bad: list[Path] = []
    for ckpt in reversed(list_checkpoints(run_dir)):
        try:
            loaded = read_checkpoint(ckpt)
        except CheckpointError as exc:
            skipped.append(str(exc))
            bad.append(ckpt)
            log.warning("checkpoint %s is not usable: %s", ckpt.name, exc)
            continue
        if move_aside:
            for damaged in bad:
                _move_aside(damaged)
        return loaded, skipped
    return None, skipped


def _move_aside(ckpt: Path) -> Path:
    aside = ckpt.with_name(f"{ckpt.name}.corrupt")
    k = 1
    while aside.exists():
        k += 1
        aside = ckpt.with_name(f"{ckpt.name}.corrupt{k}")
    os.replace(ckpt, aside)
    return aside


# ---- restore -----------------------------------------------------------------------------
def apply_checkpoint(loaded: _Loaded, model: Any, optimizer: Any, scheduler: Any, rank: int = 0,
                     parallel: ParallelStrategy | None = None, reference: KLReference | None = None) -> None:
    """Load the adapter, optimizer, scheduler and RNG state; ``parallel`` lays the whole saved
    tensors out as the run's strategy holds them (e.g. each rank cuts its own shards).
    ``reference``: takes the checkpoint's KL reference (loaded through the adapter first)."""
    parallel = parallel or single_process()
    if reference is not None and loaded.reference is not None:
        problem = parallel.load_adapter(model, loaded.reference)
        if problem:
            raise CheckpointError(loaded.path / REFERENCE_FILE, f"does not match the model ({problem})")
        reference.adopt(model, loaded.reference)
    elif reference is not None and loaded.state.warmup_done:
        log.warning("%s has no %s (written before rubricgym kept it): the KL reference is the base model, "
                    "not the warm-started policy", loaded.path.name, REFERENCE_FILE)
    problem = parallel.load_adapter(model, loaded.adapter)
    if problem:
        raise CheckpointError(loaded.path / ADAPTER_FILE, f"does not match the model ({problem})")
    _check_param_groups(loaded, optimizer)
    try:
        saved = _optimizer_state_dict(loaded.state, loaded.tensors)
        optimizer.load_state_dict(parallel.optimizer_state_for(optimizer, saved))
        if scheduler is not None and loaded.state.scheduler is not None:
            scheduler.load_state_dict(loaded.state.scheduler)
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(loaded.path / STATE_FILE, f"does not fit this model's optimizer ({exc})") from None
    try:
        _set_rng(loaded.state, loaded.tensors)
        if rank > 0:
            _set_rank_rng(loaded.state, loaded.tensors, rank)
    except (KeyError, ValueError, TypeError, RuntimeError, OverflowError) as exc:
        raise CheckpointError(loaded.path / TENSORS_FILE, f"holds an unusable RNG state ({exc})") from None


def _check_param_groups(loaded: _Loaded, optimizer: Any) -> None:
    """Saved optimizer settings must have the live optimizer's keys and value kinds (a
    string learning rate would only fail at the next step, far from its cause)."""
    live = optimizer.state_dict()["param_groups"]
    saved = loaded.state.optimizer_param_groups
    where = loaded.path / STATE_FILE
    if len(saved) != len(live):
        raise CheckpointError(where, f"has {len(saved)} optimizer parameter groups; the model has {len(live)}")
    for i, (s, g) in enumerate(zip(saved, live)):
        if set(s) != set(g):
            raise CheckpointError(where, f"optimizer group {i} has settings {sorted(s)}; expected {sorted(g)}")
        for key, value in g.items():
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, (int, float)) and (isinstance(s[key], bool) or not isinstance(s[key], (int, float))):
                raise CheckpointError(where, f"optimizer group {i}: {key} must be a number")


def restore_latest(run_dir: Path, model: Any, optimizer: Any, scheduler: Any, rank: int = 0,
                   parallel: ParallelStrategy | None = None, reference: KLReference | None = None) -> Restored:
    """Restore the newest intact checkpoint of ``run_dir`` into the given objects, warning
    about (and moving aside) newer damaged ones; ``CheckpointError`` when none is intact."""
    run_dir = Path(run_dir)
    loaded, skipped = newest_intact(run_dir)
    if loaded is None:
        if skipped:
            raise CheckpointError(run_dir, "no intact checkpoint to resume from: " + "; ".join(skipped))
        raise CheckpointError(run_dir, "no checkpoint to resume from")
    if skipped:
        log.warning("resuming from %s; newer checkpoints were damaged: %s", loaded.path.name, "; ".join(skipped))
    apply_checkpoint(loaded, model, optimizer, scheduler, rank, parallel, reference)
    return Restored(loaded.path, loaded.state, skipped)


def restore_checkpoint(path: Path, model: Any, optimizer: Any, scheduler: Any, rank: int = 0,
                       parallel: ParallelStrategy | None = None, reference: KLReference | None = None) -> Restored:
    """Restore one given checkpoint (verified first) as rank ``rank`` (the ranks > 0 of a
    several-process run restore the checkpoint rank 0 chose)."""
    loaded = read_checkpoint(path)
    apply_checkpoint(loaded, model, optimizer, scheduler, rank, parallel, reference)
    return Restored(loaded.path, loaded.state, [])


def load_checkpoint(path: Path, model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Restore one given checkpoint; returns its counters (``iteration``, ``data_position``,
    ``warmup_done``, ``config``)."""
    loaded = read_checkpoint(path)
    apply_checkpoint(loaded, model, optimizer, scheduler)
    return loaded.state.model_dump(include={"iteration", "data_position", "warmup_done", "config"})
