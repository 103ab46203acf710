import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from rubricgym.env import RubricEnv

from toy_envs import CounterAdapter


def act(cmd: str) -> str:
    return f"<think>try</think><action>{cmd}</action>"


@pytest.fixture
def env():
    e = RubricEnv(CounterAdapter(), max_steps=6, render_mode="ansi")
    yield e
    e.close()


def test_check_env_passes(env):
    check_env(env, skip_render_check=False)


def test_step_returns_transition_with_shared_facts(env):
    obs, info = env.reset(seed=0, options={"task_id": "reach-2"})
    assert obs == "Reach 2. Value 0." and info["binding"].target == 2
    _, r, term, trunc, info = env.step(act("inc"))
    t = info["transition"]
    assert (r, term, trunc) == (0.0, False, False)
    assert t.facts.parsed and t.facts.accepted and t.facts.admissible and t.facts.state_changed
    assert t.facts.new_entities == ["n1"] and t.context_key == "v=0"
    _, r, term, _, info = env.step(act("inc"))
    assert term and r == 1.0 and info["transition"].facts.episode_done
    assert env.trajectory.outcome.success is True
    assert [x.step for x in env.trajectory.transitions] == [0, 1]


def test_invalid_and_rejected_and_repeated(env):
    env.reset(seed=0, options={"task_id": "reach-3"})
    t = env.step("no tags at all")[4]["transition"]
    assert not t.facts.parsed and t.facts.parse_error == "missing_tag" and t.facts.rejected
    assert not t.facts.state_changed and t.facts.admissible is None
    t = env.step(act("jump"))[4]["transition"]
    assert t.facts.parsed and t.facts.rejected and t.facts.admissible is False and t.facts.error_text
    t1 = env.step(act("peek"))[4]["transition"]
    t2 = env.step(act("peek"))[4]["transition"]
    assert not t1.facts.repeated and t2.facts.repeated
    t3 = env.step(act("inc"))[4]["transition"]
    assert not t3.facts.repeated


def test_step_budget_truncates(env):
    env.reset(seed=0, options={"task_id": "reach-3"})
    for _ in range(5):
        assert not env.step(act("peek"))[3]
    _, _, term, trunc, _ = env.step(act("peek"))
    assert trunc and not term
    with pytest.raises(gym.error.ResetNeeded):
        env.step(act("peek"))


def test_engine_failure_is_truncated_and_labelled(env):
    env.reset(seed=0, options={"task_id": "reach-2"})
    _, _, term, trunc, info = env.step(act("crash"))
    assert trunc and not term and info["environment_failure"]
    t = info["transition"]
    assert t.error.startswith("environment failure") and not t.facts.rejected and not t.facts.accepted
    env.reset(seed=0, options={"task_id": "reach-2"})  # next reset works


def test_identical_resets(env):
    a = env.reset(seed=5)
    b = env.reset(seed=5)
    assert a[0] == b[0] and a[1]["task_id"] == b[1]["task_id"]
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "nope"})


def test_render_and_close(env):
    env.reset(seed=1, options={"task_id": "reach-2"})
    assert "Reach 2" in env.render()
    env.step(act("inc"))
    assert "[step 0] > inc" in env.render()
    env.close()
    assert env.adapter.closed


def test_non_string_action_is_classified(env):
    env.reset(seed=0)
    t = env.step(12345)[4]["transition"]  # type: ignore[arg-type]
    assert t.facts.parse_error == "invalid_text"


def test_invalid_step_does_not_repeat_previous_events(env):
    env.reset(seed=0, options={"task_id": "reach-3"})
    env.step(act("inc"))
    t = env.step("garbage")[4]["transition"]
    assert t.facts.value == 0  # benchmark facts fall back to defaults; no stale events
