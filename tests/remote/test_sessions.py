"""32 concurrent sessions on one served ALFWorld: no error, no cross-talk (each trajectory is
its in-process run), and the 33rd over ``--max-sessions 32`` is refused with a clear error."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest
from remote.parity import episode
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.remote.client import RemoteEnvError

pytestmark = pytest.mark.slow  # 32 sessions over 2 worker processes, ~40 s on 2 cores

SESSIONS = 32
TASKS = ["look_at_obj_in_light-Pen-None-FloorLamp-330/trial_T00000013_train_00",  # a small pool of games:
         "pick_and_place_simple-SaltShaker-None-DiningTable-24/trial_T00000018_train_00"]  # 3- and 4-step plans


def _wrap(command: str) -> str:
    return f"<think>go</think><action>{command}</action>"


def test_32_sessions_at_once_no_cross_talk_and_the_33rd_is_refused(serve):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT

    kwargs = {"data_path": str(BUNDLED_ROOT), "reward": "none"}  # a game load per session is the cost; no rubric
    server = serve("ALFWorld-Rubric-v0", "--max-sessions", str(SESSIONS), "--workers", "2", "--reward", "none",
                   kwargs={"data_path": kwargs["data_path"]})
    local = gym.make("ALFWorld-Rubric-v0", **kwargs)
    plans = {}
    for task in TASKS:
        local.reset(seed=0, options={"task_id": task})
        plans[task] = [_wrap(c) for c in local.unwrapped.adapter.expert_plan()]

    def job(k: int) -> tuple[str, int, list[str]]:  # sessions differ in task, seed and a junk prefix
        task = TASKS[k % 2]
        return task, k % 2, [_wrap("look")] * ((k // 2) % 2) + plans[task]

    expected = {}
    for k in range(SESSIONS):
        key = tuple(map(str, job(k)))
        if key not in expected:
            expected[key] = episode(local, *job(k))
    local.close()

    remotes = [gym.make("rubricgym/Remote-v0", url=server.url, env_id="ALFWorld-Rubric-v0", timeout_s=240)
               for _ in range(SESSIONS)]
    t0 = time.monotonic()
    with ThreadPoolExecutor(SESSIONS) as pool:
        got = list(pool.map(lambda k: episode(remotes[k], *job(k)), range(SESSIONS)))
    elapsed = time.monotonic() - t0
    for k, run in enumerate(got):
        assert run == expected[tuple(map(str, job(k)))], f"session {k} differs from its in-process run"
        assert run[-1]["outcome"]["success"] is True
    print(f"{SESSIONS} concurrent ALFWorld episodes in {elapsed:.1f} s")

    extra = gym.make("rubricgym/Remote-v0", url=server.url, env_id="ALFWorld-Rubric-v0", timeout_s=60)
    with pytest.raises(RemoteEnvError, match=r"(?i)capacity|max"):  # all 32 sessions are still held
        extra.reset(seed=0, options={"task_id": TASKS[0]})
    extra.close()
    for remote in remotes:
        remote.close()
