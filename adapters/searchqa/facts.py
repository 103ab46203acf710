"""The binding SearchQA operators read: what the question asks for, never its answer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rubricgym.adapter import TaskBinding

AnswerFormat = Literal["", "person", "place", "date", "number", "yes_no", "entity"]


class SearchQABinding(TaskBinding):
    """Extracted from the question by ``bind_task`` (deterministic, no model, no gold answer).

    Empty fields mean the rules could not determine them; operators then return 0.
    """

    answer_format: AnswerFormat = Field("", description="expected answer type from the wh-word and cue words")
    target_entities: list[str] = Field(default_factory=list, description="quoted titles and capitalised name spans, as written")
    relation: str = Field("", description="main predicate words, lower-case, wh-word, entities and constraints removed")
    constraints: list[str] = Field(default_factory=list, description="years, ordinals, superlatives, 'before 1990'-style bounds")
