"""Trajectories for judge tests, built through ``rubricgym.contract`` (no engine)."""

from __future__ import annotations

from rubricgym.contract import Facts, Outcome, ParsedAction, Trajectory, Transition


def make_trajectory(task_id: str = "t1", observations: list[str] | None = None, seed: int = 0,
                    instruction: str = "Pay back Alice the $20 she sent you yesterday.") -> Trajectory:
    observations = observations or ["Logged in.", "Found 1 transaction from Alice: $20.", "Payment sent."]
    transitions = []
    for i, obs in enumerate(observations):
        action = f"call_api_{i}()"
        transitions.append(
            Transition(
                step=i,
                response=f"<think>step {i}</think><action>{action}</action>",
                action=ParsedAction(ok=True, kind="action", action=action, reasoning=f"step {i}"),
                observation=obs,
                facts=Facts(accepted=True, episode_done=i == len(observations) - 1),
                terminated=i == len(observations) - 1,
            )
        )
    return Trajectory(benchmark="base", task_id=task_id, seed=seed, instruction=instruction,
                      initial_observation="You are on the phone home screen.", transitions=transitions,
                      outcome=Outcome(success=None))


def record_alfworld_group(size: int = 3, task_index: int = 0, max_steps: int = 8):
    """``size`` rollouts of one bundled ALFWorld game on the real engine, of varied quality:
    the expert plan, the expert plan with a wasted detour and an invalid command, and
    random admissible commands (seeded). Returns (instruction, trajectories)."""
    import random

    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the env ids)
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT

    env = gym.make("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT, max_steps=max_steps)
    adapter = env.unwrapped.adapter
    task_id = list(adapter.task_ids())[task_index]
    trajs = []
    try:
        for i in range(size):
            _, info = env.reset(seed=0, options={"task_id": task_id})
            plan = adapter.expert_plan()
            kind = i % 3
            if kind == 1:
                plan = ["look", "jump around wildly", *plan]
            rng = random.Random(i)
            for step in range(max_steps):
                if kind == 2:
                    command = rng.choice(sorted(info["admissible_actions"] or ["look"]))
                elif step < len(plan):
                    command = plan[step]
                else:
                    break
                _, _, term, trunc, info = env.step(f"<think>step {step}</think><action>{command}</action>")
                if term or trunc:
                    break
            trajs.append(env.unwrapped.trajectory.model_copy(deep=True))
    finally:
        env.close()
    return trajs[0].instruction, trajs
