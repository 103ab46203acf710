"""Records that several training processes combine or keep per rank: rollout metrics merged
over the ranks, and each rank's random state as JSON for checkpoints. The process group and
its collectives are ``trainers/parallel/ranks.py``.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch


# ---- metrics from every rank ---------------------------------------------------------------
# How each rollout metric of ``trainer.group_metrics`` is combined over ranks: a mean over
# rollouts, over steps, over steps with a TRCA record, or a plain sum.
METRIC_WEIGHTS = {"success_rate": "rollouts", "return_mean": "rollouts", "env_return_mean": "rollouts",
                  "episode_steps": "rollouts", "action_parsed_rate": "steps", "response_tokens_mean": "steps",
                  "trca_reward_mean": "trca_steps", "rollout_errors": "sum", "distinct_group_share": "compared_groups"}


def merge_rank_metrics(parts: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """One rank-independent set of rollout metrics from each rank's ``{"metrics": ...,
    "counts": {"rollouts", "steps", "trca_steps", "compared_groups"}}``: count-weighted means, summed counts."""
    out: dict[str, float] = {}
    keys = sorted({k for p in parts for k in p["metrics"]})
    for key in keys:
        kind = METRIC_WEIGHTS.get(key, "rollouts")
        have = [p for p in parts if key in p["metrics"]]
        if kind == "sum":
            out[key] = float(sum(p["metrics"][key] for p in have))
            continue
        weight = sum(p["counts"][kind] for p in have)
        if weight > 0:
            out[key] = float(sum(p["metrics"][key] * p["counts"][kind] for p in have) / weight)
    return out


# ---- each rank's random state, as JSON (checkpoints) --------------------------------------
def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().contiguous().numpy().tobytes()).decode("ascii")


def _from_b64(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text, validate=True)), dtype=torch.uint8).clone()


def rng_snapshot() -> dict[str, Any]:
    """This process's torch (CPU and current CUDA device), Python and NumPy RNG states."""
    version, internal, gauss = random.getstate()
    algorithm, keys, position, has_gauss, cached = np.random.get_state()
    cuda = [_b64(torch.cuda.get_rng_state())] if torch.cuda.is_available() else []
    return {"torch": _b64(torch.get_rng_state()), "cuda": cuda,
            "python": {"version": version, "internal": list(internal), "gauss_next": gauss},
            "numpy": {"algorithm": str(algorithm), "keys": [int(k) for k in keys], "position": int(position),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}}


def snapshot_tensors(snapshot: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The torch/CUDA states of a snapshot as uint8 tensors (for a safetensors file)."""
    out = {"torch": _from_b64(snapshot["torch"])}
    for i, state in enumerate(snapshot.get("cuda", [])):
        out[f"cuda/{i}"] = _from_b64(state)
    return out
