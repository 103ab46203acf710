"""Vector envs (``gym.make_vec``) with rubricgym: reading each sub-env's info back, and
keeping every finished episode.

A vector env stacks the sub-envs' ``info`` dicts into one dict of arrays, with a ``_key``
mask beside every key (True where that sub-env returned the key); nested dicts (the reward
records) are stacked the same way, so counting ``infos["trca"]["judgments"]`` directly
counts the masks too. ``unstack_infos`` gives back one plain ``info`` dict per sub-env.
With autoreset, the step after an episode ends starts the next one: read the finished
episode's ``Trajectory`` from that step's infos with ``finished_trajectories``.

>>> import gymnasium as gym, rubricgym
>>> envs = gym.make_vec("ALFWorld-Rubric-v0", num_envs=2, vectorization_mode="sync", max_steps=2)
>>> _ = envs.reset(seed=0)
>>> _, _, _, _, infos = envs.step(["<think>x</think><action>look</action>", "no tags"])
>>> stacked = infos["rubric"]["trca"]["judgments"]
>>> any(key.startswith("_") for key in stacked)  # a mask beside every operator
True
>>> per_env = unstack_infos(infos, 2)
>>> [sorted(set(info["rubric"]["trca"]["judgments"].values())) for info in per_env]
[[0, 1], [0, 1]]
>>> _, _, _, truncated, infos = envs.step(["<think>x</think><action>look</action>"] * 2)
>>> [(i, t.num_steps) for i, t in finished_trajectories(infos)]
[(0, 2), (1, 2)]
>>> envs.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rubricgym.contract import Trajectory

__all__ = ["finished_trajectories", "unstack_infos"]


def _item(value: Any, index: int) -> Any:
    item = value[index]
    return item.item() if isinstance(item, np.generic) else item


def _unstack(stacked: Mapping[str, Any], index: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in stacked.items():
        if key.startswith("_") and key[1:] in stacked:
            continue  # a mask
        mask = stacked.get(f"_{key}")
        if mask is not None and not bool(mask[index]):
            continue  # this sub-env did not return the key
        out[key] = _unstack(value, index) if isinstance(value, Mapping) else _item(value, index)
    return out


def unstack_infos(infos: Mapping[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """One ``info`` dict per sub-env from a vector env's stacked infos (masks applied and
    dropped, nested dicts unstacked, numpy scalars as Python values)."""
    return [_unstack(infos, index) for index in range(num_envs)]


def finished_trajectories(infos: Mapping[str, Any]) -> list[tuple[int, Trajectory]]:
    """``(sub-env index, Trajectory)`` of every episode that ended at this vector step, each
    with its transitions' facts and reward records, before autoreset starts the next."""
    trajectories, mask = infos.get("trajectory"), infos.get("_trajectory")
    if trajectories is None or mask is None:
        return []
    return [(int(i), trajectories[i]) for i in np.flatnonzero(mask) if isinstance(trajectories[i], Trajectory)]
