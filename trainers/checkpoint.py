"""Checkpoints that resume exactly: adapter, optimizer, scheduler, RNG states, data position.

A checkpoint is a folder ``checkpoint-<iteration>`` written under a temporary name and
renamed into place, so a crash mid-write leaves the previous checkpoint as the latest.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.pt"
ADAPTER_DIR = "adapter"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: Path, iteration: int, model: Any, optimizer: Any, scheduler: Any,
                    extra: dict[str, Any], keep: int = 2) -> Path:
    run_dir = Path(run_dir)
    final = run_dir / f"{PREFIX}{iteration:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=run_dir))
    try:
        model.save_pretrained(str(tmp / ADAPTER_DIR))
        torch.save({
            "iteration": iteration,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": rng_state(),
            **extra,
        }, tmp / STATE_FILE)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary folders start with '.')."""
    found = [p for p in Path(run_dir).glob(f"{PREFIX}*") if (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def load_checkpoint(path: Path, model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Restore everything into the given objects; returns the saved extras (iteration, ...)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(path)
    weights = path / ADAPTER_DIR / "adapter_model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{path}: no adapter weights ({weights.name})")
    device = next(model.parameters()).device
    result = set_peft_model_state_dict(model, load_file(str(weights), device=str(device)))
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise ValueError(f"{path}: adapter does not match the model (unexpected keys {unexpected[:3]}...)")
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return state
