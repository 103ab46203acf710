"""OpenEnv's own client plays a served rubricgym env unchanged, and the HTTP side of the app
says what it does: /health, /schema, /metadata, a one-shot POST /reset, a refused POST /step."""

from __future__ import annotations

import httpx
import pytest
from remote.conftest import SERVED_ALFWORLD, SERVED_ALFWORLD_MAX_STEPS

import rubricgym  # noqa: F401  (registers the env ids)

pytestmark = pytest.mark.slow  # starts a server and its ALFWorld session worker


@SERVED_ALFWORLD
def test_openenv_generic_client_plays_alfworld_to_success(alfworld_server):
    import gymnasium as gym
    from openenv.core import GenericEnvClient

    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
    from rubricgym.remote.wire import PROTOCOL, RubricObservation, schema_digest

    kwargs = {"data_path": str(BUNDLED_ROOT)}
    server = alfworld_server  # the bundled games, 6 steps an episode (the plan takes 3)
    task = "look_at_obj_in_light-Pen-None-FloorLamp-330/trial_T00000013_train_00"
    local = gym.make("ALFWorld-Rubric-v0", max_steps=SERVED_ALFWORLD_MAX_STEPS, **kwargs)
    local.reset(seed=0, options={"task_id": task})
    plan = local.unwrapped.adapter.expert_plan()
    rewards_here = [local.step(f"<think>go</think><action>{c}</action>")[1] for c in plan]
    local.close()

    with GenericEnvClient(base_url=server.url, message_timeout_s=120).sync() as client:
        result = client.reset(seed=0, task_id=task)
        assert "You are in the middle of a room" in result.observation["text"] and not result.done
        rewards_there = []
        for command in plan:
            result = client.step({"action": f"<think>go</think><action>{command}</action>"})
            rewards_there.append(result.reward)
        meta = result.metadata
        assert result.done and meta["terminated"] and meta["trajectory"]["outcome"]["success"] is True
        assert meta["facts"]["accepted"] and "trca" in meta["rubric"]  # every component's record, not one scalar
        assert rewards_there == rewards_here  # the scalar is the env's total step reward, as in-process

    assert "loopback only" in server.line and "no auth built in" in server.line  # it says how it is bound
    http = httpx.Client(base_url=server.url, timeout=60)
    assert http.get("/health").json()["status"] == "healthy"
    schema = http.get("/schema").json()
    assert schema["observation"] == RubricObservation.model_json_schema()
    assert "wire_meta" in schema["observation"]["properties"]["metadata"]
    metadata = http.get("/metadata").json()
    assert metadata["name"] == "ALFWorld-Rubric-v0" and PROTOCOL in metadata["version"] and schema_digest() in metadata["version"]
    refused = http.post("/step", json={"action": {"action": "<action>look</action>"}})
    assert refused.status_code == 409 and "/ws" in refused.json()["detail"]
    one_shot = http.post("/reset", json={"seed": 0, "task_id": task})
    assert one_shot.status_code == 200 and "middle of a room" in one_shot.json()["observation"]["text"]
