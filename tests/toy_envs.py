"""A tiny deterministic adapter used to test the core without any benchmark engine."""

from __future__ import annotations

from typing import ClassVar

from rubricgym.adapter import Adapter, EngineFailure, EngineReset, EngineStep, TaskBinding
from rubricgym.contract import Facts, Outcome, ParsedAction


class CounterFacts(Facts):
    benchmark: ClassVar[str] = "Counter"
    value: int = 0


class CounterBinding(TaskBinding):
    target: int = 0


class CounterAdapter(Adapter):
    """Reach ``target`` with the commands ``inc`` / ``dec`` / ``peek``; ``crash`` breaks the engine."""

    benchmark = "Counter"
    facts_model = CounterFacts
    binding_model = CounterBinding

    def __init__(self) -> None:
        self.value = 0
        self.target = 0
        self.closed = False

    def task_ids(self):
        return ["reach-2", "reach-3"]

    def _state(self, text: str, **kw) -> dict:
        return dict(
            observation=text,
            state_signature=f"v={self.value}",
            admissible_actions=["inc", "dec", "peek"],
            entities=[f"n{self.value}"],
            context_key=f"v={self.value}",
            benchmark_facts={"value": self.value},
            **kw,
        )

    def reset(self, task_id: str, seed):
        self.value, self.target = 0, int(task_id.split("-")[1])
        return EngineReset(instruction=f"Reach {self.target}.", **self._state(f"Reach {self.target}. Value 0."))

    def step(self, action: ParsedAction) -> EngineStep:
        if action.action == "crash":
            raise EngineFailure("counter engine died")
        if action.action == "inc":
            self.value += 1
        elif action.action == "dec":
            self.value -= 1
        elif action.action != "peek":
            return EngineStep(accepted=False, error_text="Nothing happens.", **self._state("Nothing happens."))
        won = self.value == self.target
        return EngineStep(reward=float(won), terminated=won, **self._state(f"Value {self.value}."))

    def binding(self) -> CounterBinding:
        return CounterBinding(target=self.target)

    def outcome(self) -> Outcome:
        return Outcome(success=self.value == self.target)

    def close(self) -> None:
        self.closed = True
