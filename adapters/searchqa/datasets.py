"""Per-dataset env ids for users' files: ``register_dataset("nq", questions=...)`` makes
``gym.make("SearchQA-nq-Rubric-v0")`` play those questions (and ``...-Eval-v0`` when an eval
file is given), with the SearchQA operator library attached like the built-in ids."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym

from rubricgym.adapters.searchqa.data import load_questions

ENTRY_POINT = "rubricgym.registration:make_rubric_env"


def _check_name(name: str) -> None:
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"dataset name {name!r} must be alphanumeric (with - or _)")


def register_dataset(name: str, questions: str | os.PathLike[str], eval_questions: str | os.PathLike[str] | None = None,
                     **adapter_kwargs: Any) -> list[str]:
    """Register ``SearchQA-<name>-Rubric-v0`` (and ``-Eval-v0``); returns the ids. The question
    files are read once here so a bad file fails now, not at the first ``gym.make``.
    ``adapter_kwargs`` (corpus, server_url, grammar, topk, ...) go to every env made."""
    _check_name(name)
    made = []
    for suffix, path in (("", questions), ("-Eval", eval_questions)):
        if path is None:
            continue
        load_questions(path)
        env_id = f"SearchQA-{name}-Rubric{suffix}-v0"
        if env_id in gym.registry:
            raise ValueError(f"{env_id} is already registered")
        gym.register(id=env_id, entry_point=ENTRY_POINT,
                     kwargs={"benchmark": "SearchQA", "questions": str(path), **adapter_kwargs})
        made.append(env_id)
    return made
