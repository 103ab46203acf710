"""rubricgym's verl agent loop (issue 55, item 1 and test 4b; docs/verl.md): real ALFWorld episodes
by a real SmolLM2, run by verl 0.9.1's own ``AgentLoopWorker`` from the agent loop config yaml
and the parquet rows rubricgym writes, batched as verl's trainer batches them, then through
verl's ``compute_advantage`` with rubricgym's estimators: equal, token for token, to
rubricgym's ``completion_advantages``. verl's servers (vLLM, SGLang, TensorRT-LLM) need a GPU,
so the model is served in-process by transformers behind verl's server-manager interface
(``TransformersServer`` in the runner). A second group replays the expert's plan against
wandering through the same loop, so the credit compared is not all zeros. Runs in the verl venv
(tests/integrations/verl_agent_loop_run.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from requirements_guard import need, need_path

ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = ROOT / ".venvs" / "verl" / "bin" / "python"
NAMES = ["trca", "gigpo", "grpo"]
AGENT_NAME = "rubricgym_agent"  # the name the loop registers under (verl_agent_loop.AGENT_NAME)

# one xdist worker runs the module, so its fixture (a verl run) runs once, not once per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("verl-agent-loop")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    need_path(VERL_PYTHON, "make setup builds the verl venv (make verl-venv, mk/verl.mk)")
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    from rubricgym.models import smollm2_path

    work = tmp_path_factory.mktemp("verl_agent_loop")
    done = subprocess.run([str(VERL_PYTHON), str(ROOT / "tests" / "integrations" / "verl_agent_loop_run.py"),
                           str(smollm2_path()), str(work)],
                          cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_rows_reach_the_loop_through_verl_s_dataset(run):
    rows = run["rows"]
    assert [r["agent_name"] for r in rows] == [AGENT_NAME, AGENT_NAME]
    assert [r["seed"] for r in rows] == [5, 2] and [r["index"] for r in rows] == [0, 1]
    assert all(r["env_id"] == "ALFWorld-Rubric-v0" for r in rows) and rows[0]["task_id"] != rows[1]["task_id"]
    assert run["registered"] == {"_target_": "rubricgym.integrations.verl_agent_loop.RubricAgentLoop"}


def test_the_rollouts_of_a_row_share_one_initial_state(run):
    a, b = run["per_row"]
    assert a["uid"] == b["uid"]
    assert a["task_id"] == b["task_id"] == a["row_task"] and a["seed"] == b["seed"] == 5
    assert a["first_anchor"] == b["first_anchor"] and "Your task is to" in a["first_anchor"]
    assert a["prompt"] == b["prompt"]


def test_smollm2_plays_real_episodes(run):
    for row in run["per_row"]:
        assert 1 <= row["steps"] <= run["max_steps"]
        assert row["replayed_rewards"] == row["env_rewards"], row  # the same replies, a fresh env: the same rewards
        assert row["replay_ended"] == (row["truncated_by"] != "max_completion_length"), row
        assert all(row["rubric_records"]) and all(row["context_keys"])
        assert all(isinstance(t, str) and t for t in row["replies"])
        assert row["rm_score"] == row["env_return"]  # the episode return is verl's reward score
        assert row["turn_scores"] == row["env_rewards"]
        assert row["num_turns"] == 2 * row["steps"]
    assert run["per_row"][0]["replies"] != run["per_row"][1]["replies"]  # sampled, not one reply twice


def test_the_response_is_the_model_s_tokens_and_the_observation_turns(run):
    for row in run["per_row"]:
        assert row["spans_are_the_mask"], row  # response_mask 1 exactly on the steps' spans
        assert row["actions_inside_spans"]
        assert row["has_observation_tokens"] or row["steps"] == 1
        assert row["response_length"] <= run["response_length"]
    calls = run["calls"]
    assert len(calls) == sum(r["steps"] for r in run["per_row"])
    assert all(c["max_tokens"] <= run["max_new_tokens"] and 0 < c["new"] <= c["max_tokens"] for c in calls)
    by_episode: dict[str, list[int]] = {}
    for c in calls:
        by_episode.setdefault(c["request_id"], []).append(c["prompt_length"])
    assert len(by_episode) == len(run["per_row"])  # one request id per episode
    assert all(lengths == sorted(lengths) and len(set(lengths)) == len(lengths) for lengths in by_episode.values())


def test_the_server_s_log_probs_are_the_response_tokens(run):
    assert "rollout_log_probs" in run["batch_keys"]
    assert run["logprob_gap"] < 1e-3  # against one forward pass over prompt + response
    assert all(row["logprobs_zero_off_mask"] for row in run["per_row"])


def test_the_episode_reaches_the_batch(run):
    assert {"rubricgym_episode", "turn_scores", "uid"} <= set(run["non_tensor_keys"])
    assert {"rm_scores", "responses", "response_mask", "token_level_rewards"} <= set(run["batch_keys"])


@pytest.mark.parametrize("name", NAMES)
def test_verl_compute_advantage_on_the_agent_loop_s_batch_equals_rubricgym_s(run, name):
    got = run["results"][name]
    assert got["equal"] and got["max_abs_diff"] == 0.0 and got["inside_response_mask"], got
    replayed = run["replay"]["results"][name]
    assert replayed["equal"] and replayed["max_abs_diff"] == 0.0 and replayed["inside_response_mask"], replayed
    assert replayed["nonzero_tokens"] > 0 and replayed["distinct_values"] >= 2, replayed
    assert replayed["only_action_tokens"] == name.startswith("trca"), replayed


def test_the_replayed_group_wins_once(run):
    replay = run["replay"]
    assert replay["successes"] == [True, False] and replay["returns"] == [1.0, 0.0]
    assert replay["rm_scores"] == replay["returns"]
    assert replay["steps"] == [replay["plan_steps"], replay["plan_steps"] + 1]


def test_the_loop_refuses_a_row_without_a_seed_and_a_prompt_it_would_cut(run):
    assert run["missing_seed_error"].startswith("MissingSeed: prompt row 0 has no 'seed'")
    assert "actor_rollout_ref.rollout.prompt_length=64" in run["prompt_too_long_error"]
    assert run["calls_after_refusals"] == 0  # refused before the model was asked


def test_many_episodes_in_one_worker_keep_to_their_own_envs(run):
    """Six rows x two rollouts in flight at once in one worker, their turns interleaved (the
    server yields on every call, as a network wait does): each episode replays alike in a fresh
    env from its own row's seed and task; the env pool grows to the episodes in flight and a
    second batch reuses it."""
    many = run["concurrency"]
    for round_ in ("first", "second"):
        got = many[round_]
        assert got["interleaved"] and got["requests"] == many["episodes"], got
        assert got["mismatched"] == [], got
        assert got["successes"] == [True, False] * (many["episodes"] // 2), got  # the plan wins, wandering does not
        assert got["pooled_envs"] == many["episodes"] and got["credit_equal"], got
