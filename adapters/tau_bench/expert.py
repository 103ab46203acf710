"""tau-bench's expert player: the gold replay of a tau2 task as agent actions.

Agent-side gold actions become tool-call actions; each run of user-side gold actions
(telecom device actions) becomes one message asking the user to do them (the scripted user
performs them); the last action is a closing message that states the task's
``communicate_info`` (tau2 checks that those strings reach the user).
"""

from __future__ import annotations

import json
from itertools import groupby
from typing import TYPE_CHECKING, Any

from rubricgym import ExpertAction

if TYPE_CHECKING:
    from rubricgym.adapters.tau_bench.adapter import TauBenchAdapter


def final_message(task: Any) -> str:
    ec = task.evaluation_criteria
    comm = list(ec.communicate_info or []) if ec else []
    said = (" ".join(comm) + " ") if comm else ""
    return f"All done. {said}Is there anything else I can help you with?"


def gold_actions(task: Any) -> list[Any]:
    ec = task.evaluation_criteria
    return list(ec.actions or []) if ec else []


def gold_replay(task: Any, drop: int | None = None) -> list[str]:
    """Action texts (the ``<action>`` contents) replaying the gold actions, without gold action ``drop``."""
    steps: list[str] = []
    indexed = [(i, a) for i, a in enumerate(gold_actions(task)) if i != drop]
    for requestor, run in groupby(indexed, key=lambda ia: ia[1].requestor):
        group = [a for _, a in run]
        if requestor == "user":
            asked = "; ".join(f"{a.name}({json.dumps(a.arguments, sort_keys=True)})" for a in group)
            steps.append(f"Please do the following on your phone: {asked}")
        else:
            steps.extend(json.dumps({"name": a.name, "arguments": a.arguments}) for a in group)
    steps.append(final_message(task))
    return steps


def expert_actions(adapter: TauBenchAdapter) -> list[str | ExpertAction]:
    """The spec's expert player: the gold replay of the adapter's current task."""
    return [ExpertAction(a) for a in gold_replay(adapter.task)]
