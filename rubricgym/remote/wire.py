"""What goes over the wire between ``rubricgym serve-env`` and its clients: the OpenEnv action
and observation models, the handshake, and the JSON form of a step's ``info``.

The observation's ``metadata`` carries everything an in-process step's ``info`` holds (the
transition with its typed facts, ``info["rubric"]``, the outcome and trajectory at the end),
so a client rebuilds the same ``info``; models are named by reference and rebuilt only from
this process's registry (nothing on the wire chooses code to import). The JSON form of ``info``
lives in ``rubricgym.remote.info_json`` (no OpenEnv: the session workers use it) and is
re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import rubricgym.remote.openenv_core  # noqa: F401  (first: OpenEnv loads without its Gradio playground)
from openenv.core import Action, Observation
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.remote.info_json import CONTRACT_MODELS, info_from_json, info_to_json  # noqa: F401  (the info's JSON form, re-exported)

__all__ = [
    "PROTOCOL", "Handshake", "HandshakeRefused", "ResetArgs", "RubricAction", "RubricObservation", "WireMeta",
    "info_from_json", "info_to_json", "schema_digest",
]

PROTOCOL = "rubricgym-remote/1"
MAX_ACTION_CHARS = 1 << 20


class HandshakeRefused(ValueError):
    """Client and server disagree on the protocol, the schema or the env id."""


class RubricAction(Action):
    """One agent response: the env's action text, exactly what ``env.step`` takes in-process."""

    action: str = Field(max_length=MAX_ACTION_CHARS, description="the agent's response text")


class WireMeta(BaseModel):
    """The ``metadata`` of every observation: the step's whole ``info``, JSON-safe."""

    model_config = ConfigDict(extra="forbid")

    protocol: str = PROTOCOL
    env_id: str
    event: Literal["reset", "step"]
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info, models as JSON")
    models: dict[str, str] = Field(default_factory=dict, description="info key -> the model its JSON validates as")
    facts: dict[str, Any] | None = Field(None, description="the step's typed facts (info['transition'].facts)")
    rubric: dict[str, Any] | None = Field(None, description="info['rubric']: every reward component's record")
    trajectory: dict[str, Any] | None = Field(None, description="the episode so far (at reset and at its end)")
    env: dict[str, Any] | None = Field(None, description="at reset: the benchmark, its action grammar and task ids")


class RubricObservation(Observation):
    """The observation text; ``reward`` is the env's total step reward (what ``env.step`` returns)."""

    text: str = Field(description="the observation text")
    metadata: dict[str, Any] = Field(default_factory=dict, description="a WireMeta",
                                     json_schema_extra={"wire_meta": WireMeta.model_json_schema()})


class Handshake(BaseModel):
    """Sent with the first reset by rubricgym's client; plain OpenEnv clients send none."""

    model_config = ConfigDict(extra="forbid")

    protocol: str
    schema_digest: str
    env_id: str | None = None


class ResetArgs(BaseModel):
    """What a reset may carry (anything else is refused, by name)."""

    model_config = ConfigDict(extra="forbid")

    seed: int | None = Field(None, ge=0)
    task_id: str | None = None
    episode_id: str | None = None
    handshake: Handshake | None = None


def schema_digest() -> str:
    """A short hash of the action and observation schemas: both sides must agree on it."""
    text = json.dumps([RubricAction.model_json_schema(), RubricObservation.model_json_schema(),
                       WireMeta.model_json_schema()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_handshake(handshake: Handshake, env_id: str) -> None:
    """Refuse a client built for another protocol, schema or env (named, with both sides)."""
    if handshake.protocol != PROTOCOL:
        raise HandshakeRefused(f"handshake refused: client speaks {handshake.protocol!r}, server {PROTOCOL!r}")
    if handshake.schema_digest != schema_digest():
        raise HandshakeRefused(f"handshake refused: client schema {handshake.schema_digest}, "
                               f"server schema {schema_digest()} (upgrade one side)")
    if handshake.env_id is not None and handshake.env_id != env_id:
        raise HandshakeRefused(f"handshake refused: client asked for {handshake.env_id!r}, this server serves {env_id!r}")
