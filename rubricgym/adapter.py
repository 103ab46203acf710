"""The adapter contract: what a benchmark driver provides to ``RubricEnv``.

An adapter drives one engine and reports raw observable state (signature, entities,
admissible set, benchmark facts). The shared facts (admissible, repeated, state_changed,
new_entities, parse failures) are derived once, in ``RubricEnv``, never per adapter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Facts, Outcome, ParsedAction
from rubricgym.parsing import ACTION_GRAMMAR, TagGrammar

__all__ = ["Adapter", "EngineFailure", "EngineReset", "EngineState", "EngineStep", "PolicyFailure", "TaskBinding"]


class EngineFailure(RuntimeError):
    """The engine broke for a reason the action did not cause (a server down before the step,
    an evaluator that fails on a gold replay): the episode ends as truncated, labelled as an
    environment failure, and is not blamed on the policy."""


class PolicyFailure(RuntimeError):
    """The action's content broke the engine while it ran (an exception it raised, the
    sandbox dying or hanging on it): a policy outcome. The step is scored as invalid
    (``facts.broke_engine``) and the episode ends as a failure; were it an environment failure,
    a policy could learn to escape its penalties by triggering it.

    ``facts``: the benchmark's own facts for the step (so that its Invalidity operators see
    the failure as they see any failed action)."""

    def __init__(self, message: str, facts: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.facts: dict[str, Any] = dict(facts or {})


class TaskBinding(BaseModel):
    """Task-specific fields that operators read (targets, constraints). Never gold answers."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return cls.model_json_schema()


class EngineState(BaseModel):
    """The observable state after a reset or a step, as the adapter reports it."""

    observation: str
    state_signature: str = Field(description="hash-like summary of the observable state")
    admissible_actions: list[str] | None = None
    entities: list[str] = Field(default_factory=list, description="entity ids visible now")
    context_key: str = Field("", description="structural decision context of this state")
    benchmark_facts: dict[str, Any] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


class EngineReset(EngineState):
    instruction: str


class EngineStep(EngineState):
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    accepted: bool = True
    error_text: str = ""


class Adapter(ABC):
    """One benchmark engine behind a uniform, text-in/text-out interface."""

    benchmark: ClassVar[str]
    facts_model: ClassVar[type[Facts]] = Facts
    binding_model: ClassVar[type[TaskBinding]] = TaskBinding
    grammar: TagGrammar = ACTION_GRAMMAR

    @abstractmethod
    def task_ids(self) -> Sequence[str]:
        """Task ids this adapter can reset to, in a stable order."""

    @abstractmethod
    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        """Start ``task_id``; the same task and seed must give the same observation."""

    @abstractmethod
    def step(self, action: ParsedAction) -> EngineStep:
        """Execute one parsed action. Raise ``PolicyFailure`` when the action's content broke
        the engine while it ran, ``EngineFailure`` when the engine broke for another reason."""

    @abstractmethod
    def binding(self) -> TaskBinding:
        """The current task's binding, extracted deterministically from its instruction."""

    def outcome(self) -> Outcome:
        """The benchmark's own verdict on the current episode (for evaluation only)."""
        return Outcome()

    def is_admissible(self, action: str, state: EngineState) -> bool | None:
        """Whether ``action`` was admissible in ``state`` (``None``: the engine lists none).
        Adapters whose actions take free-text arguments (``search[...]``) override this."""
        if state.admissible_actions is None:
            return None
        return action in state.admissible_actions

    def invalid_step(self, action: ParsedAction, state: EngineState) -> EngineStep:
        """The engine's answer to an unparseable response: nothing happens, state unchanged.

        Benchmark facts fall back to their defaults: the previous step's events (a pick-up,
        a visit) did not happen again. Adapters override this to carry standing state facts
        (location, inventory) into the invalid step."""
        feedback = f"Invalid response ({action.error.value if action.error else 'unparsed'}): {action.detail}"
        return EngineStep(
            observation=feedback,
            state_signature=state.state_signature,
            admissible_actions=state.admissible_actions,
            entities=state.entities,
            context_key=state.context_key,
            accepted=False,
            error_text=feedback,
        )

    def render_state(self) -> str:
        return ""

    def close(self) -> None:  # noqa: B027 (optional: an adapter with no engine resources keeps this)
        """Free engine resources; safe to call twice."""
