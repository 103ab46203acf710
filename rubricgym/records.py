"""One reader for the reward records every step carries.

``RubricReward`` writes each component's record as a plain JSON-safe dict under
``info["rubric"][<component name>]`` (vector envs stack it, it goes over the wire and into
files). Everything that reads records back — credit, the trainer, evaluation, reports —
goes through ``step_records`` here and gets typed models: ``TRCARecord`` for a TRCA
component (it carries ``r_F`` and ``r_B``), ``JudgeRecord`` for an LLM judge (``verdicts``,
or ``pending``), ``ComponentRecord`` for any other. A record's kind is read from its shape,
so a component's name is free (``TRCAConfig(name="shaping")``).
Older files carry TRCA's record at ``info["trca"]`` and a judge's at ``info["judge"]``; they
read the same.

>>> info = {"rubric": {"trca": {"reward": 0.1, "weight": 1.0, "judgments": {"E1": 1},
...     "r_F": 0.2, "r_B": 0.075, "r_TRCA": 0.1, "lambda": 0.8, "gamma": 0.95}}}
>>> records = step_records(info)
>>> records.trca().r_F, records.trca().name
(0.2, 'trca')
>>> records.judge() is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


__all__ = ["ComponentRecord", "JudgeRecord", "MissingRecord", "StepRecords", "TRCARecord", "has_records",
           "read_component", "step_records"]

R = TypeVar("R", bound="ComponentRecord")
LEGACY_KEYS = ("trca", "judge")  # where files written before info["rubric"] kept their records


class MissingRecord(ValueError):
    """A step has no record of the kind a reader needs (e.g. no TRCA reward was attached)."""


class ComponentRecord(BaseModel):
    """Any component's record: its name (the key in ``info["rubric"]``), reward and weight,
    and every other part it wrote (kept as extra fields)."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    name: str
    reward: float = 0.0
    weight: float = 1.0

    @property
    def parts(self) -> dict[str, Any]:
        """The component's own parts (everything but name, reward and weight)."""
        return dict(self.__pydantic_extra__ or {})


class TRCARecord(ComponentRecord):
    """A TRCA component's record of one step (``rubricgym.trca.wrapper.TRCAComponent``)."""

    judgments: dict[str, int] = Field(default_factory=dict)
    r_F: float
    r_B: float
    r_TRCA: float
    lam: float | None = Field(None, alias="lambda")
    gamma: float | None = None
    coverage: dict[str, int] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    incidents: list[dict[str, Any]] = Field(default_factory=list)
    disabled: list[str] = Field(default_factory=list)
    library: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _reward_is_r_trca(cls, data: Any) -> Any:
        """The step reward and r_TRCA are one number; files of either age carry one or both."""
        if isinstance(data, Mapping):
            if "reward" not in data and "r_TRCA" in data:
                return {**data, "reward": data["r_TRCA"]}
            if "r_TRCA" not in data and "reward" in data:
                return {**data, "r_TRCA": data["reward"]}
        return data


class JudgeRecord(ComponentRecord):
    """An LLM judge component's record (``rubricgym.judges.wrapper.JudgeComponent``): verdicts
    on the step that ended the episode, ``pending`` on the steps before it."""

    pending: bool = False
    rubric: str | None = None
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
    criteria: dict[str, str] = Field(default_factory=dict)
    unanswered: int = 0


def _kind(record: Mapping[str, Any]) -> type[ComponentRecord]:
    if "r_F" in record and "r_B" in record:
        return TRCARecord
    if isinstance(record.get("verdicts"), list) or record.get("pending") is True:
        return JudgeRecord
    return ComponentRecord


class StepRecords(BaseModel):
    """Every component record of one step, typed, by component name."""

    model_config = ConfigDict(frozen=True)

    components: dict[str, ComponentRecord] = Field(default_factory=dict)

    def component(self, name: str) -> ComponentRecord | None:
        return self.components.get(name)

    def of_kind(self, kind: type[R]) -> dict[str, R]:
        return {name: r for name, r in self.components.items() if isinstance(r, kind)}

    def trca(self, name: str | None = None) -> TRCARecord | None:
        """The TRCA record: the component ``name``, else the only TRCA component (several
        without a name is an error naming them)."""
        return self._one(TRCARecord, name)

    def judge(self, name: str | None = None) -> JudgeRecord | None:
        """The judge record: the component ``name``, else the only judge component."""
        return self._one(JudgeRecord, name)

    def _one(self, kind: type[R], name: str | None) -> R | None:
        found = self.of_kind(kind)
        if name is not None:
            return found.get(name)
        if len(found) > 1:
            raise ValueError(f"several {kind.__name__}s on one step ({sorted(found)}): name the component to read")
        return next(iter(found.values()), None)


def _info_of(source: Any) -> Mapping[str, Any]:
    """The info mapping of a step: an ``info`` dict, or anything with ``.info`` (a
    ``Transition``, a trainer's step sample)."""
    info = source if isinstance(source, Mapping) else getattr(source, "info", None)
    return info if isinstance(info, Mapping) else {}


def read_component(name: str, record: Mapping[str, Any]) -> ComponentRecord:
    """One component's record, typed by its shape. A malformed record raises
    ``pydantic.ValidationError`` (a ``ValueError``) naming the field."""
    return _kind(record).model_validate({**record, "name": name})


def step_records(source: Any, strict: bool = True) -> StepRecords:
    """The typed records of one step: ``source`` is an ``info`` dict or has ``.info``.
    ``strict=False`` (files from elsewhere) leaves malformed records out instead of raising."""
    info = _info_of(source)
    raw: dict[str, Mapping[str, Any]] = {}
    for legacy in LEGACY_KEYS:
        if isinstance(info.get(legacy), Mapping):
            raw[legacy] = info[legacy]
    rubric = info.get("rubric")
    if isinstance(rubric, Mapping):
        raw.update({str(k): v for k, v in rubric.items() if isinstance(v, Mapping)})
    components: dict[str, ComponentRecord] = {}
    for name, record in raw.items():
        try:
            components[name] = read_component(name, record)
        except ValueError:
            if strict:
                raise
    return StepRecords(components=components)


def has_records(source: Any) -> bool:
    """Whether a step carries any reward record."""
    info = _info_of(source)
    return isinstance(info.get("rubric"), Mapping) or any(isinstance(info.get(k), Mapping) for k in LEGACY_KEYS)
