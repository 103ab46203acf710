"""Play one episode in-process and remote and compare everything a step gives."""

from __future__ import annotations

from typing import Any

from rubricgym.remote.wire import info_to_json


def _kinds(info: dict[str, Any]) -> dict[str, str]:
    """The Python types a step's info holds (typed facts and models, not just their JSON)."""
    kinds = {k: type(v).__name__ for k, v in info.items()}
    if "transition" in info:
        kinds["facts"] = type(info["transition"].facts).__name__
    return kinds


def episode(env, task_id: str | None, seed: int, responses: list[str]) -> list[Any]:
    """Everything the env gives for one episode: observations, rewards, flags, info (as JSON
    and its types), and the trajectory at the end."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
    out: list[Any] = [("reset", obs, info_to_json(info), _kinds(info))]
    for response in responses:
        obs, reward, terminated, truncated, info = env.step(response)
        out.append((obs, reward, terminated, truncated, info_to_json(info), _kinds(info)))
        if terminated or truncated:
            break
    trajectory = env.unwrapped.trajectory
    out.append(trajectory.model_dump(mode="json"))
    return out


def assert_same_episode(local, remote, task_id: str | None, seed: int, responses: list[str]) -> list[Any]:
    here = episode(local, task_id, seed, responses)
    there = episode(remote, task_id, seed, responses)
    assert len(here) == len(there), (len(here), len(there))
    for k, (a, b) in enumerate(zip(here, there, strict=True)):
        assert a == b, f"step {k - 1} differs:\nin-process {a}\nremote     {b}"
    return here
