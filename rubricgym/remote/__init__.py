"""Play a served rubricgym env from anywhere: ``gym.make("rubricgym/Remote-v0", url=..., env_id=...)``.

``rubricgym serve-env ENV_ID`` serves any registered env over OpenEnv's protocol (see
docs/remote.md); ``rubricgym.remote.client.RemoteEnv`` is a real ``gymnasium.Env`` over its
WebSocket. Registering the id imports nothing optional: the client module (and the
``openenv`` extra it needs) loads only when the env is made.
"""

from __future__ import annotations

import gymnasium as gym

from rubricgym.registration import register_client_env_id

__all__ = ["REMOTE_ENV_ID", "register_remote_env"]

REMOTE_ENV_ID = "rubricgym/Remote-v0"


def register_remote_env() -> None:
    """Register ``rubricgym/Remote-v0`` with gymnasium (idempotent)."""
    if REMOTE_ENV_ID not in gym.registry:
        gym.register(id=REMOTE_ENV_ID, entry_point="rubricgym.remote.client:RemoteEnv",
                     disable_env_checker=True)  # the server's env was checked; a step costs a round trip
    register_client_env_id(REMOTE_ENV_ID)  # commands taking env ids take it (with url=, env_id=)
