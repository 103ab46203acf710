"""Prompt files and the rendering of untrusted content as delimited data.

Every piece of text that came from an environment, an agent or an earlier judge call is
JSON-encoded and wrapped in ``<<<BEGIN DATA kind=K id=X>>> ... <<<END DATA kind=K id=X>>>``
where ``X`` is a hash of the block's content: text inside a block cannot forge its end
marker (it would have to contain the hash of itself), and the system prompt says that
block content is evidence, never instructions. The id is content-derived rather than
random so identical requests stay identical and the response cache works.

Layout for prefix caching: system prompt, then the phase text, then everything the whole
group shares (instruction, criteria, output format, the task id and the initial observation,
which is identical within a group), and only then the rollout's own steps. Nothing is padded:
the shared part is simply first.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from importlib import resources
from typing import Any

from rubricgym.contract import Trajectory

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
PHASE_TEMPLATES = ("propose", "extend", "merge", "score")


@cache
def load_prompt(name: str) -> str:
    """A packaged prompt file (``rubricgym/judges/prompts/<name>.md``)."""
    return resources.files("rubricgym.judges").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def render_template(template: str, values: dict[str, Any]) -> str:
    """One pass of ``{{name}}`` substitution: inserted values are never re-scanned, so data
    that happens to contain ``{{...}}`` stays literal."""

    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"prompt placeholder {{{{{key}}}}} has no value")
        return str(values[key])

    return _PLACEHOLDER.sub(sub, template)


def data_block(kind: str, body: str) -> str:
    """Wrap already JSON-encoded ``body`` in content-hashed BEGIN/END markers."""
    if not re.fullmatch(r"[a-z_]+", kind):
        raise ValueError(f"bad data kind {kind!r}")
    nonce = hashlib.sha256(f"{kind}\n{body}".encode()).hexdigest()[:16]
    return f"<<<BEGIN DATA kind={kind} id={nonce}>>>\n{body}\n<<<END DATA kind={kind} id={nonce}>>>"


def _clip(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} ...[{len(text) - 2 * keep} chars omitted]... {text[-keep:]}"


def instruction_block(instruction: str, max_chars: int = 4000) -> str:
    return data_block("task_instruction", json.dumps({"instruction": _clip(instruction, max_chars)}, ensure_ascii=False))


def criteria_block(criteria: list[tuple[str, str]]) -> str:
    """``criteria``: (id, text) pairs, one JSON object per line."""
    lines = [json.dumps({"id": cid, "text": text}, ensure_ascii=False) for cid, text in criteria]
    return data_block("criteria", "[\n" + ",\n".join(lines) + "\n]")


def initial_observation_block(traj: Trajectory, max_observation_chars: int = 1500) -> str:
    """The task id and the observation the rollout started from: the same for every rollout
    of a group, so it belongs to the shared prefix, before the rollout's own steps."""
    body = {"task_id": traj.task_id, "initial_observation": _clip(traj.initial_observation, max_observation_chars)}
    return data_block("initial_observation", json.dumps(body, ensure_ascii=False))


def trajectory_block(traj: Trajectory, max_response_chars: int = 1500, max_observation_chars: int = 1500,
                     with_initial: bool = True) -> str:
    """The rollout as JSON, one step per line, numbered by position (0..M-1). With
    ``with_initial=False`` the task id and initial observation are left to
    ``initial_observation_block``."""
    head: dict[str, Any] = {}
    if with_initial:
        head = {"task_id": traj.task_id, "initial_observation": _clip(traj.initial_observation, max_observation_chars)}
    head["num_steps"] = len(traj.transitions)
    lines = []
    for i, t in enumerate(traj.transitions):
        step: dict[str, Any] = {"step": i}
        if t.action.ok:
            if t.action.reasoning:
                step["thought"] = _clip(t.action.reasoning, max_response_chars)
            step["action"] = _clip(t.action.action, max_response_chars)
        else:
            step["invalid_response"] = _clip(t.response, max_response_chars)
            step["parse_error"] = t.action.error.value if t.action.error else "unparsed"
        step["observation"] = _clip(t.observation, max_observation_chars)
        if t.facts.error_text:
            step["environment_error"] = _clip(t.facts.error_text, 300)
        if t.error:
            step["environment_failure"] = _clip(t.error, 300)
        if t.terminated or t.truncated:
            step["episode_end"] = "terminated" if t.terminated else "truncated"
        lines.append(json.dumps(step, ensure_ascii=False))
    body = json.dumps(head, ensure_ascii=False)[:-1] + ', "steps": [\n' + ",\n".join(lines) + "\n]}"
    return data_block("trajectory", body)


def format_block(example: str, schema: dict[str, Any] | None) -> str:
    """How to answer: a compact example, plus the full schema when the server does not
    enforce it while decoding."""
    text = example
    if schema is not None:
        text += "\nJSON Schema of the reply: " + json.dumps(schema, separators=(",", ":"))
    return text


def build_messages(phase: str, values: dict[str, Any]) -> list[dict[str, str]]:
    if phase not in PHASE_TEMPLATES:
        raise ValueError(f"unknown judge phase {phase!r}")
    return [
        {"role": "system", "content": load_prompt("system")},
        {"role": "user", "content": render_template(load_prompt(phase), values)},
    ]
