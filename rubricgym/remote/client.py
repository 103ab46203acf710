"""``RemoteEnv``: a real ``gymnasium.Env`` over a served env's WebSocket (OpenEnv's client).

Not the trainer's worker-side ``rubricgym.trainers.env_workers.WorkerEnvView`` (a view of a
slot in a local worker pool): this one plays ``rubricgym serve-env`` on any host. ``info`` and
``trajectory`` are the in-process ones, rebuilt through this process's benchmark registry.
Every wait is bounded (``timeout_s``); a server that dies or stops answering ends the episode
as a truncated, labelled engine failure, and the next ``reset`` connects afresh.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import rubricgym.remote.openenv_core  # noqa: F401  (first: OpenEnv loads without its Gradio playground)
from openenv.core import EnvClient, State
from openenv.core.client_types import StepResult
from websockets.exceptions import WebSocketException
from websockets.protocol import State as WSState

from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition
from rubricgym.env import MAX_TEXT
from rubricgym.parsing import ACTION_GRAMMAR, TagGrammar
from rubricgym.remote.wire import (
    PROTOCOL, Handshake, RubricAction, RubricObservation, WireMeta, info_from_json, schema_digest,
)
from rubricgym.spaces import UnicodeText

__all__ = ["RemoteEnv", "RemoteEnvError", "RubricEnvClient", "ServedAdapter"]

SERVER_GONE = "EngineFailure: remote env server"
# what a call can raise when the server refuses, vanishes or stops answering
WIRE_ERRORS = (RuntimeError, OSError, TimeoutError, asyncio.TimeoutError, ValueError, WebSocketException)


class RemoteEnvError(RuntimeError):
    """The server refused a request (handshake, capacity, bad reset arguments)."""


class RubricEnvClient(EnvClient[RubricAction, RubricObservation, State]):
    """OpenEnv's ``EnvClient`` typed for rubricgym's wire models."""

    def _step_payload(self, action: RubricAction) -> dict[str, Any]:
        return {"action": action.action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[RubricObservation]:
        obs = payload.get("observation") or {}
        observation = RubricObservation(text=obs.get("text", ""), metadata=obs.get("metadata") or payload.get("metadata") or {},
                                        reward=payload.get("reward"), done=bool(payload.get("done")))
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)


@dataclass(frozen=True)
class ServedAdapter:
    """What the served env's adapter tells a client's prompts: benchmark, grammar, task ids."""

    benchmark: str
    grammar: TagGrammar = ACTION_GRAMMAR
    ids: tuple[str, ...] | None = None
    has_expert: bool = False  # an expert plays through the engine, which is on the server: no warm start here

    def task_ids(self) -> list[str]:
        if self.ids is None:
            raise ValueError("the served env exposes no task ids")
        return list(self.ids)


class RemoteEnv(gym.Env[str, str]):
    """A served rubricgym env: ``gym.make("rubricgym/Remote-v0", url=..., env_id=...)``."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, url: str, env_id: str | None = None, timeout_s: float = 180.0, connect_timeout_s: float = 10.0,
                 render_mode: str | None = None):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.url, self.env_id, self.timeout_s = url, env_id, timeout_s
        self.render_mode = render_mode
        self.observation_space = UnicodeText(MAX_TEXT)
        self.action_space = UnicodeText(MAX_TEXT)
        self.trajectory: Trajectory | None = None
        self.adapter: ServedAdapter | None = None  # known after the first reset
        self._client = RubricEnvClient(base_url=url, connect_timeout_s=connect_timeout_s, message_timeout_s=timeout_s)
        self._sync = self._client.sync()
        self._done = True
        self._last = ""

    # -- gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        handshake = Handshake(protocol=PROTOCOL, schema_digest=schema_digest(), env_id=self.env_id)
        data: dict[str, Any] = {"seed": seed, "handshake": handshake.model_dump()}
        if (options or {}).get("task_id") is not None:
            data["task_id"] = options["task_id"]  # type: ignore[index]
        try:
            result = self._sync.reset(**data)  # OpenEnv bounds the connect and each answer
        except WIRE_ERRORS as exc:
            raise RemoteEnvError(f"{self.url}: {type(exc).__name__}: {exc}") from None
        meta = WireMeta.model_validate(result.observation.metadata)
        if meta.env is not None:
            grammar = meta.env.get("grammar")
            self.adapter = ServedAdapter(
                benchmark=str(meta.env.get("benchmark")),
                grammar=TagGrammar(**{k: tuple(v) if isinstance(v, list) else v for k, v in grammar.items()})
                if isinstance(grammar, dict) else ACTION_GRAMMAR,
                ids=tuple(meta.env["task_ids"]) if meta.env.get("task_ids") is not None else None)
        self.trajectory = Trajectory.model_validate(meta.trajectory) if meta.trajectory else None
        self._done = False
        self._last = result.observation.text
        return result.observation.text, info_from_json(meta.info, meta.models)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done:
            raise gym.error.ResetNeeded("call reset() before step() (the last episode is over)")
        if self._session_lost():
            return self._failed(action, f"{SERVER_GONE} {self.url}: the server closed this session "
                                        "(idle past its time-out, or it restarted)")
        try:
            result = self._sync.step(RubricAction(action=action))
        except WIRE_ERRORS as exc:
            return self._failed(action, f"{SERVER_GONE} {self.url}: {type(exc).__name__}: {exc}")
        meta = WireMeta.model_validate(result.observation.metadata)
        info = info_from_json(meta.info, meta.models)
        if meta.trajectory is not None:
            self.trajectory = Trajectory.model_validate(meta.trajectory)
        elif self.trajectory is not None and isinstance(info.get("transition"), Transition):
            self.trajectory.transitions.append(info["transition"].model_copy(deep=True))
        if "trajectory" in info and isinstance(info["trajectory"], Trajectory):
            info["trajectory"] = self.trajectory
        if info.get("environment_failure") and "transition" not in info:
            return self._failed(action, str(info.get("error")), info)
        self._done = bool(meta.terminated or meta.truncated)
        self._last = result.observation.text
        return result.observation.text, float(result.reward or 0.0), meta.terminated, meta.truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        try:
            self._sync.close()
        except Exception:  # closing a dead connection is not an error
            pass
        super().close()

    # -- helpers -------------------------------------------------------------------------
    def _session_lost(self) -> bool:
        """Whether the episode's WebSocket is gone: OpenEnv's client would silently open a new
        session for the next message, which holds no episode."""
        ws = getattr(self._client, "_ws", None)
        return ws is None or ws.state in (WSState.CLOSING, WSState.CLOSED)

    def _failed(self, response: str, error: str, info: dict[str, Any] | None = None) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """End the episode as a truncated, labelled engine failure (not the agent's doing)."""
        self._done = True
        observation = f"The environment failed: {error}"
        transition = None
        if self.trajectory is not None:
            transition = Transition(benchmark=self.trajectory.benchmark, step=len(self.trajectory.transitions),
                                    response=response, action=ParsedAction(ok=False, detail="not stepped: the env is gone"),
                                    observation=observation, facts=Facts(parsed=False, episode_done=True),
                                    truncated=True, error=error)
            self.trajectory.transitions.append(transition)
        out = {**(info or {}), "environment_failure": True, "error": error}
        if transition is not None:
            out.update(transition=transition, trajectory=self.trajectory, outcome=self.trajectory.outcome)
        self._last = observation
        return observation, 0.0, False, True, out
