"""The LLM user simulator against a REAL local OpenAI-compatible server (llama-cpp-python serving
SmolLM2-135M, as in the judge tests), and against a server that is down."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from requirements_guard import need, need_path

from rubricgym.contract import save_jsonl

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "judges"))  # the judge tests' server helper
KEY_ENV = "RUBRICGYM_TAU_TEST_USER_KEY"
SECRET = "sk-tau-user-secret-123"


def dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def llama_server():
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    need("openai", "pip install 'rubricgym[tau_bench]'")
    need_path(ROOT / ".venvs" / "llama" / "bin" / "python", "make setup builds the llama.cpp server venv")
    from judge_test_servers import start_llama_server

    srv = start_llama_server()
    yield srv
    srv.stop()


def llm_env(base_url: str, **settings):
    import rubricgym  # noqa: F401

    user = {"base_url": base_url, "model": "smollm2", "api_key_env": KEY_ENV, "max_tokens": 32,
            "timeout_s": 400, "max_transport_retries": 1, "backoff_initial_s": 0.1, **settings}
    return gym.make("TauBench-Retail-Rubric-v0", user="llm", llm_user=user, max_steps=10)


@pytest.mark.timeout(2400)  # SmolLM2 on a shared 2-core CPU: each user turn reads ~1k prompt tokens
def test_a_whole_episode_with_the_llm_user(llama_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, SECRET)
    env = llm_env(llama_server.base_url)
    task_id = env.unwrapped.adapter.task_ids()[0]
    obs, info = env.reset(seed=0, options={"task_id": task_id})
    opening = obs.split("Conversation so far:\n", 1)[1].split("\n\n", 1)[0]
    assert opening.startswith("assistant: Hi! How can I help you today?\nuser: ") and len(opening) > 60
    actions = ["Could you tell me your name and zip code, please?",
               json.dumps({"name": "find_user_id_by_name_zip",
                           "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}}),
               "Thank you. What would you like me to do with your order?",
               json.dumps({"name": "done", "arguments": {}})]
    replies = []
    for a in actions:
        obs, reward, term, trunc, info = env.step(f"<action>{a}</action>")
        assert not info.get("environment_failure"), info.get("error")
        replies.append(info["transition"].facts.user_reply)
        if term or trunc:
            break
    assert term and not trunc  # the conversation ended (the user stopped, or the agent's `done`)
    assert replies[0].strip()  # the model answered the agent's question
    assert 0.0 <= reward <= 1.0 and info["outcome"].score == reward
    path = tmp_path / "traj.jsonl"
    save_jsonl(path, [env.unwrapped.trajectory])
    assert SECRET not in path.read_text()
    assert SECRET not in repr(env.unwrapped.adapter.llm_settings) and SECRET not in env.unwrapped.adapter.llm_settings.model_dump_json()
    env.close()


@pytest.mark.timeout(1200)  # bounded: one try plus one retry with a 5 s timeout each (+ one live reset)
def test_a_down_server_is_a_labelled_engine_failure(llama_server, monkeypatch):
    from rubricgym.adapter import EngineFailure

    monkeypatch.setenv(KEY_ENV, SECRET)
    env = llm_env(dead_url(), timeout_s=5)
    with pytest.raises(EngineFailure, match="user simulator: connection"):
        env.reset(seed=0, options={"task_id": "0"})
    # the server goes away in the middle of an episode: the step is a labelled engine failure
    env = llm_env(llama_server.base_url)
    env.reset(seed=0, options={"task_id": "0"})
    user = env.unwrapped.adapter.orchestrator.user
    user.settings = user.settings.model_copy(update={"base_url": dead_url(), "timeout_s": 5})
    user._client = None
    obs, reward, term, trunc, info = env.step("<action>Could you give me your email address?</action>")
    assert info["environment_failure"] and "user simulator: connection" in info["error"]
    assert trunc and not term and reward == 0.0
    assert info["transition"].error and SECRET not in info["error"]


def test_user_settings_take_keys_only_by_reference(tmp_path, monkeypatch):
    """Like the judge: a key as a value is refused without echoing it (settings reach run
    folders); a key file is taken as a reference, and the settings never hold the key."""
    from rubricgym.adapters.tau_bench.users import LLMUserSettings
    from rubricgym.secret_refs import InlineSecretError

    for bad in ({"api_key": "anything"}, {"model": SECRET}):
        with pytest.raises(ValueError, match="never accepted") as err:
            LLMUserSettings(**bad)
        assert SECRET not in str(err.value) and isinstance(err.value.errors()[0]["ctx"]["error"], InlineSecretError)
    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    settings = LLMUserSettings(api_key_file=str(key_file), base_url="http://127.0.0.1:9/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert SECRET not in settings.model_dump_json()


def test_user_settings_from_the_judge_share_its_server_and_key_reference(tmp_path):
    from rubricgym.adapters.tau_bench.users import LLMUserSettings
    from rubricgym.judges.config import JudgeSettings

    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    judge = JudgeSettings(base_url="http://127.0.0.1:9/v1", model="judge-model", api_key_env="MY_JUDGE_KEY",
                          api_key_file=str(key_file), max_reply_bytes=4096)
    user = LLMUserSettings.from_judge_settings(judge, max_tokens=64)
    assert (user.base_url, user.model, user.api_key_env, user.api_key_file, user.max_reply_bytes, user.max_tokens) == (
        "http://127.0.0.1:9/v1", "judge-model", "MY_JUDGE_KEY", str(key_file), 4096, 64)
    assert SECRET not in user.model_dump_json()
    assert LLMUserSettings.from_judge_settings(judge, api_key_env="OTHER", api_key_file=None).api_key_file is None
