"""A benchmark as a user writes it in a notebook, without packaging it: its facts, binding,
adapter, binder and an agent live in a plain module on ``sys.path`` (this file); the spec is
built and registered in the test itself (``tests/eval/test_eval_in_process.py``). Importing
this module registers nothing: a worker process knows the benchmark only if it is handed over."""

from __future__ import annotations

from typing import ClassVar

from rubricgym.adapter import Adapter, EngineReset, EngineStep, TaskBinding
from rubricgym.contract import Facts, Outcome, ParsedAction

NAME = "NotebookCounter"


class NotebookFacts(Facts):
    benchmark: ClassVar[str] = NAME
    value: int = 0
    reached: bool = False


class NotebookBinding(TaskBinding):
    target: int = 0


def bind_task(instruction: str) -> NotebookBinding:
    return NotebookBinding(target=int(instruction.split()[-1].rstrip(".")))


class NotebookAdapter(Adapter):
    """Count up to the task's target with ``inc``."""

    benchmark = NAME
    facts_model = NotebookFacts
    binding_model = NotebookBinding

    def __init__(self, tasks: int = 2):
        self.tasks, self.value, self.target = tasks, 0, 0

    def task_ids(self):
        return [f"reach-{k}" for k in range(1, self.tasks + 1)]

    def _state(self, text: str) -> dict:
        return dict(observation=text, state_signature=f"v={self.value}", admissible_actions=["inc", "dec"],
                    entities=[], context_key=f"v={self.value}",
                    benchmark_facts={"value": self.value, "reached": self.value == self.target})

    def reset(self, task_id: str, seed):
        self.value, self.target = 0, int(task_id.split("-")[1])
        return EngineReset(instruction=f"Count up to {self.target}.", **self._state("The counter shows 0."))

    def step(self, action: ParsedAction) -> EngineStep:
        self.value += {"inc": 1, "dec": -1}.get(action.action or "", 0)
        won = self.value == self.target
        return EngineStep(reward=float(won), terminated=won, **self._state(f"The counter shows {self.value}."))

    def binding(self) -> NotebookBinding:
        return bind_task(f"Count up to {self.target}.")

    def outcome(self) -> Outcome:
        return Outcome(success=self.value == self.target)


def count_up(messages):
    """The agent (``--callable notebook_bench:count_up``): always ``inc``."""
    return "<think>up</think><action>inc</action>"
