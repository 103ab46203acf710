"""Server caps (hostile agent code): a huge allocation hits the memory cap, a busy Python loop
hits the per-step CPU budget, a loop inside C code gets the server killed once it is past
budget + grace; each ends as a labelled outcome before AppWorld's own wall-clock time-out,
memory stays under the cap, and the next reset is healthy."""

from __future__ import annotations

import gymnasium as gym
import pytest
from appworld_helpers import process_gone

pytestmark = pytest.mark.slow
CAP_GB, CPU_S, GRACE_S, STEP_TIMEOUT_S = 2.0, 5.0, 1.0, 90
MEMORY_TEST_CPU_S = 60.0


@pytest.fixture(scope="module")
def env():
    env = gym.make("AppWorld-Rubric-v0", reward="none", memory_cap_gb=CAP_GB, step_cpu_s=CPU_S,
                   cpu_grace_s=GRACE_S, step_timeout_s=STEP_TIMEOUT_S)
    yield env
    env.close()


@pytest.fixture(scope="module")
def memory_env():
    """The same memory cap with a CPU budget the hoard cannot reach first: touching ~2 GB of
    fresh pages takes well under a second on an idle machine, but several on a loaded VM,
    where the 5 s budget would end the step before the cap does."""
    env = gym.make("AppWorld-Rubric-v0", reward="none", memory_cap_gb=CAP_GB, step_cpu_s=MEMORY_TEST_CPU_S,
                   cpu_grace_s=GRACE_S, step_timeout_s=STEP_TIMEOUT_S)
    yield env
    env.close()


def _healthy_step(env, task_id: str) -> None:
    env.reset(options={"task_id": task_id})
    _, _, terminated, truncated, info = env.step("<action>print(apis.supervisor.show_profile()['email'])</action>")
    assert not truncated and "environment_failure" not in info and info["transition"].facts.accepted


def test_huge_allocation_hits_the_memory_cap(memory_env):
    env = memory_env
    adapter = env.unwrapped.adapter
    task_id = adapter.task_ids()[0]
    env.reset(options={"task_id": task_id})
    _, _, _, truncated, info = env.step("<action>x = bytearray(10 ** 10)</action>")
    f = info["transition"].facts
    assert not truncated and f.execution_failed and f.exception_type == "MemoryError"
    assert f.resource_limit == "memory" and not f.accepted
    assert adapter.server.rss_bytes() < CAP_GB * 1024**3  # memory is back under the cap
    _, _, _, _, info = env.step("<action>hoard = []\nwhile True:\n    hoard.append(bytearray(10 ** 8))</action>")
    f = info["transition"].facts
    assert f.resource_limit == "memory" and f.exception_type == "MemoryError"
    assert adapter.server.rss_bytes() > CAP_GB * 1024**3 / 2  # the hoard is still referenced
    pid = adapter.server.pid
    _healthy_step(env, task_id)
    assert adapter.server.pid != pid  # a server left above half its cap is replaced at reset
    assert adapter.server.rss_bytes() < CAP_GB * 1024**3 / 2


def test_busy_python_loop_hits_the_cpu_budget(env):
    adapter = env.unwrapped.adapter
    task_id = adapter.task_ids()[0]
    env.reset(options={"task_id": task_id})
    pid = adapter.server.pid
    _, _, _, truncated, info = env.step("<action>while True:\n    pass</action>")
    f = info["transition"].facts
    assert not truncated and f.execution_failed and f.resource_limit == "cpu"
    assert f.exception_type == "CPUTimeLimitError" and not f.timed_out  # before AppWorld's wall clock
    assert adapter.server.pid == pid and adapter.server.healthy()  # the server itself is fine
    _healthy_step(env, task_id)


def test_loop_inside_c_code_gets_the_server_killed_past_budget(env):
    adapter = env.unwrapped.adapter
    task_id = adapter.task_ids()[0]
    env.reset(options={"task_id": task_id})
    pid = adapter.server.pid
    _, reward, terminated, truncated, info = env.step("<action>sum(range(10 ** 14))</action>")
    assert terminated and not truncated and reward == 0.0  # the code's doing: a policy failure
    assert "environment_failure" not in info and "CPU budget" in info["policy_failure"]
    assert info["transition"].facts.broke_engine and info["outcome"].success is False
    assert process_gone(pid, within_s=5.0)
    _healthy_step(env, task_id)
    assert adapter.server.pid != pid


def test_invalid_caps_are_refused():
    with pytest.raises(ValueError, match="memory_cap_gb"):
        gym.make("AppWorld-Rubric-v0", memory_cap_gb=0.5)
    with pytest.raises(ValueError, match="step_cpu_s"):
        gym.make("AppWorld-Rubric-v0", step_cpu_s=-1)
