"""The transition contract: what every adapter emits for every step (docs/design.md §3).

Facts are computed only from what the agent could observe plus the engine's feedback:
never gold answers, hidden state, future steps or success labels. Every field has a
default so that operator conditions never meet a missing key (CEL raises on those).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator
from pydantic_core import PydanticSerializationError

from rubricgym.jsonl import JsonLinesError, iter_json_lines
from rubricgym.secret_refs import redact

__all__ = [
    "Facts", "Outcome", "ParseError", "ParsedAction", "Span", "Trajectory", "Transition", "facts_model_for",
    "iter_jsonl", "load_jsonl", "model_ref", "register_models", "registered_model",
    "registered_model_refs", "save_jsonl",
]


class ParseError(str, Enum):
    """Why an agent response did not yield an executable action (an Invalidity event)."""

    MISSING_TAG = "missing_tag"
    UNCLOSED_TAG = "unclosed_tag"
    MULTIPLE_ACTIONS = "multiple_actions"
    EMPTY_ACTION = "empty_action"
    TOO_LONG = "too_long"
    INVALID_TEXT = "invalid_text"


Span = tuple[int, int]


class ParsedAction(BaseModel):
    """An agent response split into reasoning and action, with character spans.

    Spans are ``[start, end)`` offsets into the raw response and cover the *content*
    between the tags; the trainer maps them to token spans to build loss masks.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    kind: str | None = None  # which action tag matched ("action", "search", "answer", ...)
    action: str | None = None  # the executable command, stripped
    error: ParseError | None = None
    detail: str = ""
    reasoning: str | None = None
    reasoning_span: Span | None = None
    action_span: Span | None = None


class Facts(BaseModel):
    """Facts every benchmark can observe. Adapters subclass this with their own fields.

    A subclass sets ``benchmark`` so that stored transitions load back into the right type.
    """

    model_config = ConfigDict(extra="forbid")
    benchmark: ClassVar[str] = "base"

    parsed: bool = Field(True, description="the response yielded an executable action")
    parse_error: str | None = Field(None, description="ParseError value when parsed is false")
    admissible: bool | None = Field(
        None, description="the action was in the engine's admissible set (null: engine lists none)"
    )
    accepted: bool = Field(False, description="the engine executed the action without rejecting it")
    rejected: bool = Field(False, description="the engine answered with an error or 'nothing happens'")
    error_text: str = Field("", description="the engine's error text when rejected")
    repeated: bool = Field(
        False, description="same action as the previous step under the same state signature"
    )
    state_changed: bool = Field(False, description="the observable state signature changed")
    new_entities: list[str] = Field(
        default_factory=list, description="entity identifiers observed for the first time"
    )
    episode_done: bool = Field(False, description="the episode ended at this step")
    broke_engine: bool = Field(
        False, description="the action's content broke the engine while it ran (a policy failure: the episode ended)"
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # pydantic calls this for generic parametrisations too; keep the first (user) class
        _DEFINED_FACTS.setdefault(cls.benchmark, cls)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The fact schema that operator-library validation checks conditions against."""
        return cls.model_json_schema()


_DEFINED_FACTS: dict[str, type[Facts]] = {"base": Facts}  # every Facts subclass defined in this process
_REGISTERED_MODELS: dict[str, tuple[type[Facts], type[BaseModel]]] = {}  # benchmark -> (facts, binding)


def model_ref(model: type) -> str:
    """The ``"module:QualName"`` reference that names a model class (as libraries write it)."""
    return f"{model.__module__}:{model.__qualname__}"


def register_models(benchmark: str, facts_model: type[Facts], binding_model: type[BaseModel]) -> None:
    """Record a registered benchmark's models (called by benchmark registration): stored
    transitions of that benchmark load back with typed facts, and operator libraries may name
    these models. A second registration with other models is refused."""
    old = _REGISTERED_MODELS.get(benchmark)
    if old is not None and tuple(map(model_ref, old)) != (model_ref(facts_model), model_ref(binding_model)):
        raise ValueError(f"benchmark {benchmark!r} is registered twice, with different models")
    _REGISTERED_MODELS[benchmark] = (facts_model, binding_model)


def facts_model_for(benchmark: str) -> type[Facts]:
    """The Facts model of a benchmark: its registered one, else a Facts subclass defined in
    this process (ad-hoc envs), else the base Facts."""
    registered = _REGISTERED_MODELS.get(benchmark)
    return registered[0] if registered is not None else _DEFINED_FACTS.get(benchmark, Facts)


def registered_model(ref: str) -> type[BaseModel] | None:
    """The facts or binding model of a registered benchmark named by ``"module:QualName"``
    (None when no registered benchmark has it: the reference is never imported)."""
    for models in _REGISTERED_MODELS.values():
        for model in models:
            if model_ref(model) == ref:
                return model
    return None


def registered_model_refs() -> list[str]:
    """The references of every registered benchmark's facts and binding models, sorted."""
    return sorted(model_ref(m) for models in _REGISTERED_MODELS.values() for m in models)


class Transition(BaseModel):
    """One action-induced transition (s_t, a_t, s_t+1) with its observable facts."""

    benchmark: str = "base"
    step: int = Field(ge=0)
    response: str = Field(description="the agent's raw response text")
    action: ParsedAction
    observation: str = Field(description="observation after the action (s_t+1)")
    facts: SerializeAsAny[Facts]
    context_key: str = Field(
        "", description="structural decision context of s_t, for TRCA step-advantage groups"
    )
    env_reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    error: str | None = Field(None, description="engine or environment failure text, if any")
    info: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _typed_facts(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("facts"), dict):
            model = facts_model_for(data.get("benchmark", "base"))
            data = {**data, "facts": model.model_validate(data["facts"])}
        return data


class Outcome(BaseModel):
    """The benchmark's own verdict on an episode; rubric rewards never read it."""

    success: bool | None = None
    score: float | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class Trajectory(BaseModel):
    """A whole episode: the task, its binding, and every transition."""

    benchmark: str
    task_id: str
    seed: int | None = None
    instruction: str = ""
    binding: dict[str, Any] = Field(default_factory=dict)
    initial_observation: str = ""
    transitions: list[Transition] = Field(default_factory=list)
    outcome: Outcome = Field(default_factory=Outcome)
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        return len(self.transitions)

    def to_json_line(self) -> str:
        """One JSON line. Content cannot make it fail: text that UTF-8 cannot encode (a lone
        surrogate that got past the boundaries) is written as a JSON escape instead."""
        try:
            return self.model_dump_json()
        except PydanticSerializationError:
            return json.dumps(self.model_dump(mode="json"), separators=(",", ":"))

    @classmethod
    def from_json_line(cls, line: str) -> Trajectory:
        """The trajectory of one JSON line (``to_json_line``'s escapes of unencodable text included)."""
        try:
            return cls.model_validate_json(line)
        except ValidationError as exc:
            if not any(e["type"] == "json_invalid" for e in exc.errors()):
                raise
            return cls.model_validate(json.loads(line))  # a lone surrogate's escape: Python's reader takes it


def save_jsonl(path: str | Path, trajectories: Iterable[Trajectory], append: bool = False) -> None:
    """Write one trajectory per line (the path first, then the trajectories); keys read by
    this process are redacted (``rubricgym.secret_refs.redact``).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "episodes.jsonl"
    >>> save_jsonl(path, [Trajectory(benchmark="base", task_id="t1")])
    >>> [t.task_id for t in load_jsonl(path)]
    ['t1']
    """
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        for traj in trajectories:
            fh.write(redact(traj.to_json_line()) + "\n")


def trajectory_from_record(data: Any) -> Trajectory:
    """A stored line as a trajectory: the trajectory itself, or a record that holds one under
    ``"trajectory"`` (an episode of ``rubricgym eval``'s ``episodes.jsonl``, which adds the
    policy's side: outcome label, transcript, tokens). ``ValueError`` when it is neither."""
    if isinstance(data, dict) and "transitions" not in data and isinstance(data.get("trajectory"), dict):
        data = data["trajectory"]
    return Trajectory.model_validate(data)


def iter_jsonl(path: str | Path) -> Iterator[Trajectory]:
    """The trajectories of a JSON-lines file, one per line (or one per episode record, see
    ``trajectory_from_record``); a bad line raises ``ValueError`` naming ``file:line``."""
    for lineno, data in iter_json_lines(path, what="a trajectory"):
        try:
            yield trajectory_from_record(data)
        except ValueError as exc:
            raise JsonLinesError(f"{path}:{lineno}: not a trajectory: {exc}") from exc


def load_jsonl(path: str | Path) -> list[Trajectory]:
    """Every trajectory of a file written by ``save_jsonl(path, trajectories)``."""
    return list(iter_jsonl(path))

