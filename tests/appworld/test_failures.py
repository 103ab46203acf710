"""Failures and containment on a real AppWorld server. A server killed before a step is an
environment failure (truncated, not blamed on the policy); code that hangs, aborts or replaces
the server is a policy failure (scored, the episode ends as failed). Either way the next reset
works; escaping code stays in AppWorld's process and within its limits."""

from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import pytest
from appworld_helpers import process_gone, run_cells, task

pytestmark = pytest.mark.slow
STEP_TIMEOUT_S, MARGIN_S = 2, 4


@pytest.fixture(scope="module")
def env():
    env = gym.make("AppWorld-Rubric-v0", reward="none", split="offline_all", step_timeout_s=STEP_TIMEOUT_S,
                   call_margin_s=MARGIN_S)
    yield env
    env.close()


def _solve(env, scenario: str):
    chosen = task(scenario)
    _, _, (_, reward, terminated, _, info) = run_cells(env, chosen["id"], chosen["good"])
    assert terminated and reward == 1.0 and info["outcome"].success


def _assert_failure_transition(result, what: str):
    obs, reward, terminated, truncated, info = result
    assert truncated and not terminated and reward == 0.0
    assert info["environment_failure"] is True and "environment failure" in info["error"]
    assert what in info["error"]
    transition = info["transition"]
    assert transition.truncated and transition.error and transition.error.startswith("environment failure")
    assert not transition.facts.accepted and not transition.facts.rejected  # not the policy's fault
    assert info["outcome"].success is None


def assert_policy_failure(result, what: str):
    """The action broke the server: scored as a failed execution, the episode over and failed."""
    obs, reward, terminated, truncated, info = result
    assert terminated and not truncated and reward == 0.0
    assert "environment_failure" not in info and what in info["policy_failure"]
    assert "Your action broke the environment" in obs
    transition = info["transition"]
    assert transition.error is None and transition.terminated
    facts = transition.facts
    assert facts.broke_engine and facts.execution_failed and not facts.accepted and facts.rejected
    assert info["outcome"].success is False and what in info["outcome"].detail["policy_failure"]


def test_killed_server_mid_episode_is_labelled_and_reset_recovers(env):
    adapter = env.unwrapped.adapter
    chosen = task("paybyname")
    env.reset(options={"task_id": chosen["id"]})
    env.step(f"<action>{chosen['good'][0]}</action>")
    pid = adapter.server.pid
    os.kill(pid, signal.SIGKILL)
    while adapter.server.process.poll() is None:
        time.sleep(0.05)
    result = env.step(f"<action>{chosen['good'][1]}</action>")
    _assert_failure_transition(result, "server process exited")
    with pytest.raises(gym.error.ResetNeeded):
        env.step("<action>print(1)</action>")
    _solve(env, "paybyname")  # the next reset starts a healthy server
    assert adapter.server.pid != pid and adapter.server.healthy()


def test_code_that_hangs_the_server_is_a_policy_failure_and_the_server_is_restarted(env):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task("todocount")["id"]})
    pid = adapter.server.pid
    start = time.monotonic()
    # a C-level loop never returns to the interpreter, so AppWorld's own SIGALRM limit cannot stop it
    result = env.step("<action>sum(range(10 ** 14))</action>")
    elapsed = time.monotonic() - start
    assert_policy_failure(result, "server hung")
    assert elapsed < STEP_TIMEOUT_S + MARGIN_S + 10  # bounded by the configured call timeout
    assert process_gone(pid, within_s=1.0), "a hung server is killed at once"
    _solve(env, "todocount")
    assert adapter.server.pid != pid


def test_escaping_code_stays_inside_appworld(env, tmp_path, monkeypatch):
    adapter = env.unwrapped.adapter
    existing = tmp_path / "existing.txt"
    existing.write_text("keep me")
    created = tmp_path / "created.txt"
    monkeypatch.delenv("RUBRICGYM_ESCAPE", raising=False)
    env_before = dict(os.environ)
    question = task("answertopsender")
    answer_file = adapter.data_root / "data" / "tasks" / question["id"] / "ground_truth" / "answer.json"
    answer = answer_file.read_text()
    assert "Alan" in answer
    env.reset(options={"task_id": question["id"]})

    def run(code: str) -> tuple[str, object]:
        start = time.monotonic()
        obs, _, terminated, truncated, info = env.step(f"<action>{code}</action>")
        assert not truncated and not terminated and "environment_failure" not in info
        assert time.monotonic() - start < STEP_TIMEOUT_S + MARGIN_S + 10
        return obs, info["transition"].facts

    obs, facts = run(f"open({str(created)!r}, 'w').write('pwned')")
    assert facts.execution_failed and "not allowed" in obs
    obs, facts = run(f"import os\nos.remove({str(existing)!r})\nos.environ['RUBRICGYM_ESCAPE'] = '1'\nprint(os.getpid())")
    assert facts.code_imports == ["os"]
    assert facts.execution_failed and "not allowed" in obs  # os.remove is refused by AppWorld
    obs, facts = run("import os\nprint(os.getpid())")  # the PID check always runs: this step must execute
    assert not facts.execution_failed, obs
    server_pid = int(obs.strip().splitlines()[-1])
    assert server_pid < 10 and server_pid != os.getpid()  # agent code runs in the sandbox's own PID namespace
    obs, facts = run("import subprocess")
    assert facts.execution_failed and "not allowed" in obs
    obs, facts = run(f"print(open({str(answer_file)!r}).read())")
    assert facts.execution_failed
    obs, facts = run(f"import pathlib\nprint(pathlib.Path({str(answer_file)!r}).read_text())")
    assert facts.execution_failed and "PermissionError" in obs and answer not in obs
    obs, facts = run("while True:\n    pass")
    assert facts.execution_failed and facts.timed_out and "timed out" in obs

    assert existing.read_text() == "keep me" and not created.exists()
    assert dict(os.environ) == env_before and "RUBRICGYM_ESCAPE" not in os.environ
    assert adapter.server.healthy()  # AppWorld's limits held; the server still serves
    _solve(env, "answertopsender")


@pytest.mark.parametrize("code, what", [
    ("import os\nos.abort()", "server process exited"),
    ("import os\nos.execv('/bin/true', ['true'])", "server process exited"),
])
def test_code_that_ends_the_server_is_a_policy_failure(env, code, what):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task("todocount")["id"]})
    pid = adapter.server.pid
    assert_policy_failure(env.step(f"<action>{code}</action>"), what)
    assert process_gone(pid, within_s=5.0)
    _solve(env, "todocount")  # the next reset starts a healthy server
    assert adapter.server.pid != pid


def test_api_arguments_with_digits_int_refuses_are_the_policys_failed_call(env):
    """'²' passes str.isdigit but not int(): an app call with it is a scored failure, never an
    environment failure, and the server stays up."""
    env.reset(options={"task_id": task("todocount")["id"]})
    obs, reward, terminated, truncated, info = env.step(
        "<action>print(apis.venmo.show_transactions(access_token='x', page_index='²'))</action>")
    assert "environment_failure" not in info and not truncated
    facts = info["transition"].facts
    assert not facts.accepted and (facts.execution_failed or facts.api_error) and not facts.broke_engine
