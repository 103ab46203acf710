"""verifiers (0.4.0) evaluation of rubricgym envs against a REAL model server: ``vf-eval
rubricgym-verifiers`` (run with verifiers' own venv, .venvs/verifiers: it needs openai<3) with
SmolLM2-135M behind llama.cpp, greedy, on ALFWorld and WebShop; the replies recorded in each
rollout replayed through ``gym.make`` on the same task and seed give exactly the rewards the
trace reports (env return, TRCA return, return) and the same rubric records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from requirements_guard import need, need_path

import rubricgym  # noqa: F401 - registers the env ids
from rubricgym.remote.info_json import info_to_json

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VF_BIN = ROOT / ".venvs" / "verifiers" / "bin"
sys.path.insert(0, str(ROOT / "tests" / "judges"))  # judge_test_servers (the llama.cpp server of the judge tests)
from judge_test_servers import LLAMA_PYTHON, start_llama_server  # noqa: E402 - after its folder joins the path


@pytest.fixture(scope="module")
def llama_server():
    # checked before the server starts: skip locally, fail under CI=true
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    need_path(VF_BIN / "vf-eval", "make verifiers-venv (mk/verifiers.mk)")
    need_path(LLAMA_PYTHON, "make setup builds the llama.cpp server venv (mk/judge.mk)")
    srv = start_llama_server(n_ctx=8192)
    yield srv
    srv.stop()


def _vf_eval(server, out: Path, env_id: str, n: int) -> list[dict]:
    env = {**os.environ, "PATH": f"{VF_BIN}:{os.environ['PATH']}", "RUBRICGYM_TEST_KEY": "none"}
    done = subprocess.run(
        [str(VF_BIN / "vf-eval"), "rubricgym-verifiers", "--env.taskset.env-id", env_id, "--env.taskset.n", str(n),
         "--env.taskset.max-steps", "2", "-m", "smollm2", "--client.base-url", server.base_url,
         "--client.api-key-var", "RUBRICGYM_TEST_KEY", "--sampling.temperature", "0", "--sampling.max-tokens", "24",
         "--max-concurrent", "1", "--no-push", "-o", str(out)],
        cwd=out.parent, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (traces,) = out.glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text().splitlines()]


def _replay(env_id: str, task_id: str, seed: int, replies: list[str]) -> list[dict]:
    env = gym.make(env_id, max_steps=2)
    env.reset(seed=seed, options={"task_id": task_id})
    steps = []
    for reply in replies:
        _, reward, terminated, truncated, info = env.step(reply)
        steps.append({"reward": float(reward), "env_reward": float(info["transition"].env_reward),
                      "rubric": info_to_json({"rubric": info.get("rubric", {})})[0]["rubric"]})
        if terminated or truncated:
            break
    env.close()
    return steps


@pytest.mark.parametrize(("env_id", "n"), [("ALFWorld-Rubric-v0", 2), ("WebShop-Rubric-v0", 1)])
def test_vf_eval_rewards_are_gym_makes_on_the_same_replies(llama_server, tmp_path, env_id, n):
    if env_id.startswith("WebShop"):
        need("rapidfuzz", "pip install 'rubricgym[webshop]'")
    episodes = _vf_eval(llama_server, tmp_path / "out", env_id, n)
    traces = [t for e in episodes for t in e["traces"]]
    assert len(traces) == n and all(t["ok"] for t in traces), [t.get("errors") for t in traces]
    for trace in traces:
        played = trace["info"]["rubricgym"]
        assert played["env_id"] == env_id and 1 <= len(played["steps"]) <= 2
        replay = _replay(env_id, played["task_id"], played["seed"], [s["reply"] for s in played["steps"]])
        assert len(replay) == len(played["steps"])
        for mine, theirs in zip(played["steps"], replay, strict=True):
            assert (mine["reward"], mine["env_reward"], mine["rubric"]) == (
                theirs["reward"], theirs["env_reward"], theirs["rubric"])
        rewards = {k: v["score"] for k, v in trace["rewards"].items()}
        assert rewards["env_return"] == sum(s["env_reward"] for s in replay)
        assert rewards["trca_return"] == sum(s["rubric"]["trca"]["reward"] for s in replay)
        assert trace["metrics"]["return"] == sum(s["reward"] for s in replay)
        assert sum(v["score"] * v["weight"] for v in trace["rewards"].values()) == pytest.approx(
            trace["metrics"]["return"], abs=1e-9)
