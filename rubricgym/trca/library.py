"""The operator-library file format (YAML), as pydantic models.

A library is data: Boolean CEL conditions over ``facts`` (the step's facts), ``binding``
(the task binding) and ``coverage`` (which Evidence/Execution operators fired at an
earlier step of the episode). It is never executed as Python.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubricgym.credit.trca import CATEGORIES, DEFAULT_GAMMA, DEFAULT_LAMBDA
from rubricgym.yaml_files import YamlFileError, read_yaml_file

Category = Literal["evidence", "invalidity", "execution"]


class Budgets(BaseModel):
    """Category budgets: what all operators of a category are worth together."""

    model_config = ConfigDict(extra="forbid")

    r_evi: float = Field(1.0, gt=0, allow_inf_nan=False, description="Evidence budget (> 0)")
    r_inval: float = Field(
        1.0, allow_inf_nan=False, description="Invalidity budget; its magnitude is subtracted (sign ignored)"
    )
    r_exec: float = Field(1.0, gt=0, allow_inf_nan=False, description="Execution budget (> 0)")

    @property
    def max_step_reward(self) -> float:
        return self.r_evi + self.r_exec


class OperatorExample(BaseModel):
    """A worked case: partial facts/binding (defaults fill the rest) and the expected verdict."""

    model_config = ConfigDict(extra="forbid")

    expected: bool
    facts: dict[str, Any] = Field(default_factory=dict)
    binding: dict[str, Any] = Field(default_factory=dict)
    coverage: list[str] = Field(default_factory=list, description="operator ids covered before this step")
    note: str = ""


class Operator(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="unique; usable as coverage.<id> in CEL")
    category: Category
    description: str = Field(min_length=1)
    reads: list[str] = Field(default_factory=list, description="fact fields the condition reads")
    needs: list[str] = Field(default_factory=list, description="binding fields the condition reads")
    condition: str = Field(min_length=1, description="Boolean CEL expression")
    examples: list[OperatorExample] = Field(default_factory=list)
    expert_note: str = Field(
        "", description="why an expert walkthrough of the bundled tasks never fires this operator, if it cannot"
    )


class OperatorLibrary(BaseModel):
    """One benchmark's operator library (docs/design.md §4)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    benchmark: str = Field(min_length=1)
    description: str = ""
    facts_model: str = Field(description="'module:Class' of the Facts subclass the conditions read")
    binding_model: str = Field("", description="'module:Class' of the TaskBinding subclass")
    budgets: Budgets = Field(default_factory=Budgets)
    lam: float = Field(DEFAULT_LAMBDA, alias="lambda", ge=0.0, le=1.0, description="mix of r_B vs r_F")
    gamma: float = Field(DEFAULT_GAMMA, gt=0.0, le=1.0, description="discount of completion-aware returns")
    operators: list[Operator]

    @field_validator("lam", "gamma")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v

    @property
    def ids(self) -> list[str]:
        return [op.id for op in self.operators]

    @property
    def categories(self) -> list[str]:
        return [op.category for op in self.operators]

    def by_category(self, category: str) -> list[Operator]:
        return [op for op in self.operators if op.category == category]


def read_library_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping in a library file (YAML safe loader only: no tags, no objects)."""
    p = Path(path)
    try:
        data = read_yaml_file(p)
    except OSError as exc:
        raise FileNotFoundError(f"operator library {p}: cannot read ({exc.strerror or exc})") from exc
    except YamlFileError as exc:
        raise ValueError(f"operator library {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"operator library {p}: expected a mapping at the top level, got {type(data).__name__}")
    return data


__all__ = [
    "CATEGORIES",
    "Budgets",
    "Category",
    "Operator",
    "OperatorExample",
    "OperatorLibrary",
    "read_library_file",
]
