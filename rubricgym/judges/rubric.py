"""Rubrics: a named list of criteria, static (a YAML file) or built per group by the judge."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rubricgym.yaml_files import read_yaml_file

__all__ = ["Criterion", "Rubric", "load_rubric"]

_ID = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,63}")


class Criterion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    text: str = Field(min_length=3, max_length=1000)
    source: Literal["static", "proposed", "extended", "merged"] = "static"

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.fullmatch(value):
            raise ValueError(f"criterion id {value!r} must match {_ID.pattern}")
        return value

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return " ".join(value.split())


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    criteria: list[Criterion] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        ids = [c.id for c in self.criteria]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"rubric {self.name!r}: duplicate criterion ids {dupes}")
        return self


def load_rubric(path: str | Path) -> Rubric:
    """A rubric from a YAML/JSON file (a benchmark's packaged one is its spec's
    ``judge_rubric``: ``rubricgym.registration.judge_rubric_file(name)``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no rubric file {str(path)!r}")
    data = read_yaml_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a rubric file holds a mapping with name and criteria")
    try:
        return Rubric.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"{path}: invalid rubric: {exc}") from exc
