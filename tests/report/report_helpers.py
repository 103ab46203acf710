"""Real trajectories for the report tests, and readers of a report opened in the browser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from requirements_guard import need

from rubricgym.contract import Trajectory, save_jsonl

SCRIPT = "<script>window.pwned = 1</script>"
HTML = '<img src="http://127.0.0.1:9/x.png" onerror="window.pwned = 2"><b>bold?</b>'


def store_advantages(group: list[Trajectory], estimator: str = "trca") -> list[Trajectory]:
    """What the trainer stores per rollout: ``meta.step_advantages`` (one value per step,
    the TRCA group advantages here) and ``meta.token_advantages`` for the action text."""
    from rubricgym.estimators import group_step_advantages

    advantages = group_step_advantages(estimator, group)
    out = []
    for member, (traj, adv) in enumerate(zip(group, advantages, strict=True)):
        tokens = [[[word + " ", float(a)] for word in (t.action.action or "").split()] for t, a in
                  zip(traj.transitions, adv, strict=True)]
        meta = {**traj.meta, "iteration": 1, "group": 0, "member": member,
                "step_advantages": [float(a) for a in adv], "token_advantages": tokens}
        out.append(traj.model_copy(update={"meta": meta}))
    return out


def alfworld_group() -> list[Trajectory]:
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the env ids)

    env = gym.make("ALFWorld-Rubric-v0", max_steps=12)
    try:
        env.reset(seed=0)
        task = env.unwrapped.adapter.task_ids()[0]
        env.reset(seed=0, options={"task_id": task})
        plan = env.unwrapped.adapter.expert_plan()
        scripts = [
            [f"<think>plan</think><action>{c}</action>" for c in plan],
            ["<think>look first</think><action>look</action>",
             f"<think>{SCRIPT} {HTML}</think><action>{SCRIPT}</action>",
             *[f"<think>plan</think><action>{c}</action>" for c in plan[:2]]],
            ["<think>?</think><action>take the moon</action>", f"no tags at all {HTML}"],
        ]
        group = []
        for responses in scripts:
            env.reset(seed=0, options={"task_id": task})
            for response in responses:
                _, _, terminated, truncated, _ = env.step(response)
                if terminated or truncated:
                    break
            group.append(env.unwrapped.trajectory.model_copy(deep=True))
    finally:
        env.close()
    return store_advantages(group)


def write(path: Path, trajectories: list[Trajectory]) -> Path:
    save_jsonl(path, trajectories)
    return path


def heat_cells(driver: Any, group_id: str | None = None) -> list[dict[str, Any]]:
    """The heat-map cells of the page (or of one group): rollout, step, data-advantage, text."""
    scope = f"#group-{group_id} " if group_id else ""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(c => ({"
        "rollout: c.dataset.rollout, step: Number(c.dataset.step), advantage: c.dataset.advantage,"
        "text: c.innerText, background: getComputedStyle(c).backgroundColor}))",
        f"{scope}table.heatmap td.heat")


def step_rows(driver: Any, group_id: str | None = None) -> list[dict[str, Any]]:
    scope = f"#group-{group_id} " if group_id else ""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(r => ({"
        "rollout: r.dataset.rollout, step: Number(r.dataset.step), text: r.innerText}))",
        f"{scope}table.steps tr.step-row")


def page_facts(driver: Any) -> dict[str, Any]:
    return driver.execute_script(
        "return {scripts: document.querySelectorAll('script').length, pwned: window.pwned === undefined ? null : "
        "window.pwned, images: document.images.length, text: document.body.innerText}")


def stored_advantages(trajectories: list[Trajectory]) -> dict[tuple[str, int], float]:
    return {(f"rollout {t.meta['member']}", step.step): float(a) for t in trajectories
            for step, a in zip(t.transitions, t.meta["step_advantages"], strict=True)}


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)[:2000]
