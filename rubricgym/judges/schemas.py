"""Pydantic shapes of what the judge is asked to return, and their inline JSON Schemas.

Schemas are sent to servers that constrain decoding with them (llama.cpp grammars, OpenAI
structured outputs), so they are inlined (no ``$ref``) and bounded (``maxItems``,
``maxLength``, enums): a small model under a grammar cannot run away or invent verdicts.
"""

from __future__ import annotations

import copy
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    NOT_APPLICABLE = "not_applicable"
    UNANSWERED = "unanswered"  # the judge produced no usable verdict; never guessed


class CriterionDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=3, max_length=300)


def criteria_answer_model(max_items: int) -> type[BaseModel]:
    """{"criteria": [{"text": ...}, ...]} with at most ``max_items`` entries."""
    return create_model(
        "CriteriaAnswer",
        __config__=ConfigDict(extra="ignore"),
        criteria=(list[CriterionDraft], Field(max_length=max_items)),
    )


def score_answer_model(criterion_ids: list[str], max_citations: int, with_reason: bool) -> type[BaseModel]:
    """One required property per criterion id, in order: the grammar forces every verdict."""
    item_fields: dict[str, Any] = {}
    if with_reason:
        item_fields["reason"] = (str, Field("", max_length=300))
    item_fields["verdict"] = (Literal["pass", "fail", "not_applicable"], ...)
    item_fields["steps"] = (list[int], Field(default_factory=list, max_length=max_citations))
    item = create_model("CriterionVerdictAnswer", __config__=ConfigDict(extra="ignore"), **item_fields)
    # field names are positional; the criterion ids are aliases (ids need not be identifiers)
    fields = {f"c_{i}": (item, Field(..., alias=cid)) for i, cid in enumerate(criterion_ids)}
    return create_model("ScoreAnswer", __config__=ConfigDict(extra="ignore"), **fields)


def inline_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema with every ``$ref`` replaced by its definition, titles dropped,
    every property required and no additional properties (what strict decoders want)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                return resolve(copy.deepcopy(defs[name]))
            out = {k: resolve(v) for k, v in node.items() if k not in ("title", "default")}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)
