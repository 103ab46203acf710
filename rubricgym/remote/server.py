"""``rubricgym serve-env ENV_ID``: any registered env served with OpenEnv's own app.

Multi-step episodes go over OpenEnv's WebSocket ``/ws`` (one env per session; sessions live
in worker processes, ``rubricgym.remote.sessions``). The stateless HTTP ``POST
/step`` builds a fresh env per request, which cannot hold an episode: it is refused (409)
with a pointer to ``/ws``; ``POST /reset`` works as a one-shot (the task's first
observation). See docs/remote.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import ipaddress
import json
import logging
import os
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

import rubricgym.remote.openenv_core  # noqa: F401  (first: OpenEnv loads without its Gradio playground)
from openenv.core import Environment, State, create_app
from openenv.core.env_server.types import EnvironmentMetadata, WSErrorResponse
from pydantic import ValidationError
from starlette.responses import JSONResponse

from rubricgym.remote.wire import (
    PROTOCOL, HandshakeRefused, ResetArgs, RubricAction, RubricObservation, WireMeta, check_handshake, schema_digest,
)
from rubricgym.remote.connections import bounded_http_protocol
from rubricgym.remote.sessions import SessionPool, WorkerDied

log = logging.getLogger(__name__)

__all__ = ["SessionEnv", "WireGuard", "add_arguments", "build_app", "run"]

STATELESS_STEP = ("HTTP POST /step builds a fresh env per request and cannot hold an episode; "
                  "play episodes over the WebSocket /ws (rubricgym.remote.RemoteEnv or OpenEnv's EnvClient)")
WORKER_DIED = "EngineFailure: env worker died"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


class ResetRefused(ValueError):
    """A reset whose arguments the server or the env refuses (an unexpected field, an unknown
    task id): the client's mistake, answered with a 4xx (HTTP) or an error frame (WebSocket)."""


class Served:
    """What every session of one server shares: the env id and the session pool."""

    def __init__(self, env_id: str, pool: SessionPool):
        self.env_id, self.pool = env_id, pool


class SessionEnv(Environment[RubricAction, RubricObservation, State]):
    """One OpenEnv session: a slot in the pool, taken at the first reset, given back at close."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session's env is its own, in a worker process

    def __init__(self, served: Served):
        super().__init__()
        self.served = served
        self.slot: int | None = None
        self.generation = -1
        self._state = State(episode_id=None, step_count=0)
        self._done = True

    # -- OpenEnv API ---------------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> RubricObservation:
        try:
            args = ResetArgs(seed=seed, episode_id=episode_id, **kwargs)
        except ValidationError as exc:  # anything else is refused, by name
            raise ResetRefused("reset refused: " + "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
        if args.handshake is not None:
            check_handshake(args.handshake, self.served.env_id)
        if self.slot is None:
            self.slot = self.served.pool.acquire()
        try:
            answer, self.generation = self.served.pool.call(self.slot, "reset",
                                                            {"seed": args.seed, "task_id": args.task_id})
        except WorkerDied as exc:
            raise RuntimeError(f"{WORKER_DIED}: {exc}; reset again") from None
        if "refused" in answer:
            raise ResetRefused(f"reset refused: {answer['refused']}")
        if "error" in answer:
            raise RuntimeError(str(answer["error"]))
        self._state = State(episode_id=args.episode_id or str(uuid.uuid4()), step_count=0)
        self._done = False
        return self._observation("reset", answer, reward=None, trajectory=answer.get("trajectory"))

    def step(self, action: RubricAction, timeout_s: float | None = None, **kwargs: Any) -> RubricObservation:
        if self.slot is None or self._done:
            raise RuntimeError("no episode is running in this session: send a reset first")
        if self.served.pool.current_generation(self.slot) != self.generation:
            return self._failed(f"{WORKER_DIED}: its worker was replaced during this episode")
        try:
            answer, _ = self.served.pool.call(self.slot, "step", {"action": action.action})
        except WorkerDied as exc:
            return self._failed(f"{WORKER_DIED}: {exc}")
        if "error" in answer:
            return self._failed(f"EngineFailure: {answer['error']}")
        self._state.step_count += 1
        self._done = bool(answer["terminated"] or answer["truncated"])
        info = answer["info"]
        return self._observation("step", answer, reward=float(answer["reward"]),
                                 trajectory=info.get("trajectory") if self._done else None)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.served.env_id, version=f"{PROTOCOL} schema {schema_digest()}",
            description=f"rubricgym env {self.served.env_id}: the action is the agent's response text; each "
                        "observation's metadata holds the step's whole info (transition, typed facts, rubric records)")

    def close(self) -> None:
        if self.slot is not None:
            self.served.pool.release(self.slot)
            self.slot = None

    # -- helpers -------------------------------------------------------------------------
    def _observation(self, event: str, answer: dict[str, Any], reward: float | None,
                     trajectory: dict[str, Any] | None) -> RubricObservation:
        info = answer["info"]
        transition = info.get("transition")
        meta = WireMeta(env_id=self.served.env_id, event=event,  # type: ignore[arg-type]
                        terminated=bool(answer.get("terminated")), truncated=bool(answer.get("truncated")),
                        info=info, models=answer.get("models", {}),
                        facts=transition.get("facts") if isinstance(transition, dict) else None,
                        rubric=info.get("rubric"), trajectory=trajectory, env=answer.get("env"))
        return RubricObservation(text=answer["observation"], reward=reward, done=self._done,
                                 metadata=meta.model_dump(mode="json"))

    def _failed(self, error: str) -> RubricObservation:
        """The session's env is gone: the episode ends, truncated and labelled (not the agent's fault)."""
        self._done = True
        meta = WireMeta(env_id=self.served.env_id, event="step", truncated=True,
                        info={"environment_failure": True, "error": error})
        return RubricObservation(text=f"The environment failed: {error}", reward=0.0, done=True,
                                 metadata=meta.model_dump(mode="json"))


def _error_frame(message: str) -> str:
    return WSErrorResponse(data={"message": message, "code": "VALIDATION_ERROR"}).model_dump_json()


def _is_reset(text: str) -> bool:
    try:
        message = json.loads(text)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("type") == "reset"


class WireGuard:
    """ASGI guard in front of OpenEnv's app: refuses the stateless ``POST /step``, answers an
    oversized or binary WebSocket message with an error frame (the session goes on), closes a
    session idle for ``idle_timeout_s`` (OpenEnv's reaper never reaps one that holds a
    WebSocket), and closes a session that has not sent its first reset within
    ``reset_timeout_s`` (a connection that holds a session slot without playing would lock
    other clients out for the whole idle time-out)."""

    def __init__(self, app: Any, idle_timeout_s: float, max_message_bytes: int, reset_timeout_s: float = 30.0):
        self.app, self.idle_timeout_s, self.max_message_bytes = app, idle_timeout_s, max_message_bytes
        self.reset_timeout_s = reset_timeout_s

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST" and scope.get("path", "").rstrip("/") == "/step":
            body = json.dumps({"detail": STATELESS_STEP}).encode()
            await send({"type": "http.response.start", "status": 409,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        connected = False
        playing = False  # a reset has been sent: the session is in use

        async def guarded() -> Message:
            nonlocal connected, playing
            while True:
                if not connected:
                    message = await receive()
                    connected = message.get("type") == "websocket.connect" or connected
                    return message
                limit = self.idle_timeout_s if playing else min(self.idle_timeout_s, self.reset_timeout_s)
                try:
                    message = await asyncio.wait_for(receive(), limit)
                except TimeoutError:
                    why = (f"session idle for {limit:g} s" if playing
                           else f"no reset within {limit:g} s of connecting")
                    await send({"type": "websocket.send", "text": _error_frame(f"{why}: closed")})
                    await send({"type": "websocket.close", "code": 1001, "reason": "idle session timed out"})
                    return {"type": "websocket.disconnect", "code": 1001}
                if message.get("type") != "websocket.receive":
                    return message
                text = message.get("text")
                if text is None:
                    await send({"type": "websocket.send", "text": _error_frame("binary frames are not accepted: send JSON text")})
                    continue
                if len(text.encode("utf-8")) > self.max_message_bytes:
                    await send({"type": "websocket.send", "text": _error_frame(
                        f"message of {len(text.encode('utf-8'))} bytes is over this server's limit of "
                        f"{self.max_message_bytes} bytes")})
                    continue
                playing = playing or _is_reset(text)
                return message

        await self.app(scope, guarded, send)


def build_app(env_id: str, max_sessions: int, workers: int, reward: Any = "default",
              env_kwargs: dict[str, Any] | None = None, max_steps: int | None = None,
              idle_timeout_s: float = 600.0, step_timeout_s: float = 120.0,
              max_message_bytes: int = 4 << 20, reset_timeout_s: float = 30.0) -> tuple[WireGuard, SessionPool]:
    """OpenEnv's app serving ``env_id`` (behind ``WireGuard``) and its session pool. An env
    option that turns a sandbox off (``sandbox: false``) is refused: a served env runs what
    remote clients send."""
    if (env_kwargs or {}).get("sandbox") is False:
        raise ValueError("--kwargs sandbox=false: a served env runs agent code remote clients send, so its "
                         "sandbox stays on (docs/remote.md)")
    make_kwargs = {**(env_kwargs or {}), "reward": reward, **({"max_steps": max_steps} if max_steps else {})}
    pool = SessionPool(env_id, make_kwargs, max_sessions=max_sessions, workers=workers, call_timeout_s=step_timeout_s)
    served = Served(env_id, pool)
    app = create_app(functools.partial(SessionEnv, served), RubricAction, RubricObservation,
                     env_name=env_id, max_concurrent_envs=max_sessions)

    async def refused(_request: Any, exc: Exception) -> JSONResponse:  # the client's mistake: 422, no traceback
        return JSONResponse({"detail": str(exc)}, status_code=422)

    app.add_exception_handler(ResetRefused, refused)
    app.add_exception_handler(HandshakeRefused, refused)
    return WireGuard(app, idle_timeout_s, max_message_bytes, reset_timeout_s), pool


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="a registered env id (plugins included; rubricgym.env_ids() lists them)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free one; the line printed says which)")
    parser.add_argument("--max-sessions", type=int, default=8, help="concurrent sessions; the next is refused")
    parser.add_argument("--workers", type=int, default=None,
                        help="env worker processes the sessions share (default: min(cores, max-sessions))")
    parser.add_argument("--reward", default="default", help="the reward gym.make attaches ('default', 'none', a file)")
    parser.add_argument("--kwargs", default="{}", help="JSON object of env options for gym.make")
    parser.add_argument("--max-steps", type=int, default=None, help="step budget per episode (default: the spec's)")
    parser.add_argument("--idle-timeout-s", type=float, default=600.0, help="close a session idle this long")
    parser.add_argument("--step-timeout-s", type=float, default=120.0, help="an engine call past this ends its episode")
    parser.add_argument("--max-message-bytes", type=int, default=4 << 20,
                        help="larger messages get an error reply (the session goes on); over 4x this the WebSocket "
                        "layer itself closes the connection (code 1009)")
    parser.add_argument("--reset-timeout-s", type=float, default=30.0,
                        help="close a session that sends no reset within this long of connecting")
    parser.add_argument("--request-timeout-s", type=float, default=10.0,
                        help="close a connection that has not begun a request this long after connecting")
    parser.add_argument("--max-connections", type=int, default=None,
                        help="open connections at once, sessions and plain HTTP together; past it a new one gets "
                        "HTTP 503 and is closed (default: 4 x max-sessions + 16)")


def run(args: argparse.Namespace) -> int:
    try:
        env_kwargs = json.loads(args.kwargs)
        if not isinstance(env_kwargs, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        print(f"rubricgym serve-env: --kwargs must be a JSON object ({exc})", file=sys.stderr)
        return 2
    workers = args.workers or max(1, min(os.cpu_count() or 1, args.max_sessions))
    try:
        app, pool = build_app(args.env_id, args.max_sessions, workers, reward=args.reward, env_kwargs=env_kwargs,
                              max_steps=args.max_steps, idle_timeout_s=args.idle_timeout_s,
                              step_timeout_s=args.step_timeout_s, max_message_bytes=args.max_message_bytes,
                              reset_timeout_s=args.reset_timeout_s)
    except (LookupError, ValueError) as exc:
        print(f"rubricgym serve-env: {exc}", file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    exposure = ("loopback only (pass --host 0.0.0.0 to expose it)" if _loopback(args.host)
                else "EXPOSED beyond this machine")
    print(f"rubricgym serve-env: serving {args.env_id} at http://{args.host}:{port} (ws /ws), {exposure}; "
          f"no auth built in: put it behind your own proxy; up to {args.max_sessions} sessions over "
          f"{pool.size} worker process(es)", flush=True)
    max_connections = args.max_connections or 4 * args.max_sessions + 16
    config = uvicorn.Config(app, log_level="warning", ws_max_size=4 * args.max_message_bytes,
                            ws_ping_interval=20.0, ws_ping_timeout=20.0, timeout_graceful_shutdown=5,
                            limit_concurrency=max_connections, timeout_keep_alive=5,
                            http=bounded_http_protocol(max_connections, args.request_timeout_s))
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C / SIGINT: a normal stop
        pass
    finally:
        pool.close()
    return 0
