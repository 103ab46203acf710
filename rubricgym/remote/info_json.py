"""The JSON form of a step's ``info`` (what ``rubricgym.remote.wire`` sends in an observation's
metadata), kept apart from the wire models: a session worker, which only encodes ``info``, then
never loads OpenEnv.

Models are named by reference and rebuilt only from this process's registry (nothing on the
wire chooses code to import).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from rubricgym.contract import Outcome, Trajectory, Transition, model_ref, registered_model

__all__ = ["CONTRACT_MODELS", "info_from_json", "info_to_json"]

CONTRACT_MODELS: dict[str, type[BaseModel]] = {model_ref(m): m for m in (Transition, Trajectory, Outcome)}


def _plain(value: Any) -> Any:
    """JSON-safe copy: models dumped, numpy scalars as numbers, tuples/sets as lists; anything
    else as its repr (an adapter's odd info value must not break the session)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    item = getattr(value, "item", None)
    if callable(item):
        return _plain(item())
    return repr(value)


def info_to_json(info: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``info`` as JSON, and the model reference of each top-level value that was a model."""
    models = {str(k): model_ref(type(v)) for k, v in info.items() if isinstance(v, BaseModel)}
    return {str(k): _plain(v) for k, v in info.items()}, models


def info_from_json(info: Mapping[str, Any], models: Mapping[str, str]) -> dict[str, Any]:
    """The ``info`` an in-process step gives: each named model rebuilt from the contract or a
    registered benchmark's models (typed facts included); an unknown reference stays JSON."""
    out = dict(info)
    for key, ref in models.items():
        model = CONTRACT_MODELS.get(ref) or registered_model(ref)
        if model is not None and isinstance(out.get(key), Mapping):
            out[key] = model.model_validate(out[key])
    return out
