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
