"""A benchmark as a user writes it in a notebook, without packaging it: its facts, binding,
adapter, binder, spec, an env factory and an agent live in a plain module on ``sys.path``
(this file); the test registers the spec, as the notebook's cell would
(``tests/eval/test_eval_in_process.py``). Importing this module registers nothing: a worker
process knows the benchmark only if it is handed over, or if the factory registers it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from rubricgym import register_benchmark
from rubricgym.adapter import Adapter, EngineReset, EngineStep, TaskBinding
from rubricgym.benchmark import BenchmarkSpec, EnvIdSpec
from rubricgym.contract import Facts, Outcome, ParsedAction

NAME = "NotebookCounter"
ENV_ID = f"{NAME}-Rubric-v0"


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


SPEC = BenchmarkSpec(name=NAME, facts_model=NotebookFacts, binding_model=NotebookBinding,
                     binder="notebook_bench:bind_task", adapter="notebook_bench:NotebookAdapter",
                     env_ids=(EnvIdSpec(ENV_ID, {"tasks": 2}),), max_steps=4,
                     operator_library=Path(__file__).with_name("notebook_library.yaml"))


def make_env(max_steps: int | None = None, **kwargs: Any) -> gym.Env:
    """The env factory ``train`` uses (``register_env_factory``): it registers the spec itself,
    since a spawned env worker starts without it (idempotent where it is registered)."""
    register_benchmark(SPEC)
    return gym.make(ENV_ID, max_steps=max_steps, **kwargs)
