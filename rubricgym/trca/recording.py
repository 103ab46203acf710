"""Trajectories to test an operator library on: the benchmark's expert, and fuzz.

A library should fire its Evidence and Execution operators on an expert's episodes and its
Invalidity operators on bad behaviour. ``record_episodes`` plays either policy on the real
env (``gym.make``, no reward attached) and returns the stored ``Trajectory`` objects that
``rubricgym library test`` reads back. The fuzz policy is generic (it only uses the env's
action grammar and its admissible actions): responses without an action tag, an empty tag,
two actions at once, a command no engine knows, a repeat of the previous command, and
admissible commands picked at random (seeded).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Literal

import gymnasium as gym

from rubricgym.contract import Trajectory
from rubricgym.parsing import TagGrammar
from rubricgym.registration import get_spec

Policy = Literal["expert", "fuzz"]
NONSENSE_COMMAND = "fly to the moon"


def _fuzz_response(grammar: TagGrammar, rng: random.Random, previous: str | None, admissible: list[str],
                   step: int) -> tuple[str, str | None]:
    """One bad (or aimless) response and the command it carries, if any (the first five steps
    go through the mistakes in order; later ones are drawn from the mix)."""
    tag = grammar.action_tags[0]
    choices: list[tuple[str, str | None]] = [
        ("I am not sure what to do next.", None),  # no action tag: parse failure
        (f"<{tag}></{tag}>", None),  # an empty action
        (grammar.render(NONSENSE_COMMAND), NONSENSE_COMMAND),  # parses; no engine knows it
        (grammar.render("look") + grammar.render("look"), None),  # two actions in one response
    ]
    if step < len(choices):
        return choices[step] if step != 3 else (grammar.render(NONSENSE_COMMAND), NONSENSE_COMMAND)
    if step == len(choices):
        return choices[3]
    if previous is not None:
        choices.append((grammar.render(previous), previous))  # the same command again
    if admissible:
        pick = rng.choice(sorted(admissible))
        choices += [(grammar.render(pick), pick)] * 2  # aimless but valid
    return rng.choice(choices)


def record_episodes(
    env_id: str,
    policy: Policy = "expert",
    episodes: int | None = None,
    seed: int = 0,
    max_steps: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    task_ids: list[str] | None = None,
    progress: Callable[[int, int, Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Play ``policy`` on ``episodes`` tasks of ``env_id`` (default: every task, in order; or
    the given ``task_ids``).

    The expert plays its plan and stops (its plan solves the task); fuzz plays ``max_steps``
    (default: the env's limit) responses from the mix above, and always starts with the
    fuzz repertoire in order (no tag, empty tag, unknown command, the same again, two actions), so
    short episodes still show each kind of mistake."""
    spec = get_spec(env_id)
    expert = spec.load_expert() if policy == "expert" else None
    if policy == "expert" and expert is None:
        raise LookupError(f"{spec.name} declares no expert player (BenchmarkSpec.expert); record fuzz, or your own "
                          "agent's trajectories")
    kwargs = dict(env_kwargs or {})
    if max_steps is not None:
        kwargs["max_steps"] = max_steps
    env = gym.make(env_id, reward="none", **kwargs)
    out: list[Trajectory] = []
    try:
        base = env.unwrapped
        tasks = list(task_ids) if task_ids else list(base.adapter.task_ids())
        chosen = tasks if episodes is None else [tasks[i % len(tasks)] for i in range(episodes)]
        for n, task_id in enumerate(chosen):
            _, info = env.reset(seed=seed + n, options={"task_id": task_id})
            grammar = base.adapter.grammar
            if expert is not None:
                responses: list[str] | None = [grammar.render(a) for a in expert(base.adapter)]
            else:
                responses = None
            rng = random.Random(seed * 1_000_003 + n)
            previous: str | None = None
            limit = base.max_steps
            for step in range(limit):
                if responses is not None:
                    if step >= len(responses):
                        break
                    response = responses[step]
                else:
                    response, command = _fuzz_response(grammar, rng, previous, list(info.get("admissible_actions") or []),
                                                       step)
                    previous = command or previous
                _, _, terminated, truncated, info = env.step(response)
                if terminated or truncated:
                    break
            trajectory = base.trajectory.model_copy(deep=True)
            trajectory.meta = {**trajectory.meta, "policy": policy, "env_id": env_id}
            out.append(trajectory)
            if progress is not None:
                progress(n + 1, len(chosen), trajectory)
    finally:
        env.close()
    return out
