"""WebShop-Rubric envs on the bundled engine: oracle solves every goal, buying the first
result does not, env checker, determinism, the catalogue, and the real-env id's message."""

from __future__ import annotations

import gymnasium as gym
import pytest
from webshop.webshop_play import play
from gymnasium.utils.env_checker import check_env

from rubricgym.adapters.webshop.catalogue import BUNDLED_LABEL, bundled_catalogue
from rubricgym.adapters.webshop.expert import expert_actions
from rubricgym.adapters.webshop.real import real_env_available
from rubricgym.registration import BenchmarkNotInstalled, get_spec

CATALOGUE = bundled_catalogue()
TRAIN = [g.goal_id for g in CATALOGUE.goals if g.split == "train"]
EVAL = [g.goal_id for g in CATALOGUE.goals if g.split == "eval"]


def test_catalogue_shape_and_label():
    products = CATALOGUE.products
    assert len(products) >= 300 and len({p.product_type for p in products}) >= 10
    assert "NOT the official" in CATALOGUE.source and CATALOGUE.source == BUNDLED_LABEL
    assert len(TRAIN) > len(EVAL) > 0 and not set(TRAIN) & set(EVAL)
    targets = {g.split: set() for g in CATALOGUE.goals}
    for g in CATALOGUE.goals:
        targets[g.split].add(g.asin)
    assert not targets["train"] & targets["eval"]  # eval goals target other products
    # near-duplicates: every type has several products with the same brand and series in the title
    by_stem: dict[str, list] = {}
    for p in products:
        by_stem.setdefault(p.title.split(" with ")[0], []).append(p)
    families = [f for f in by_stem.values() if len(f) >= 3]
    assert {f[0].product_type for f in families} == {p.product_type for p in products}
    for family in families:
        variants = {(tuple(p.attributes), str(sorted(p.options.items())), p.price) for p in family}
        assert len(variants) == len(family)  # each differs in attributes, options or price


def test_spec_and_ids_are_labelled():
    spec = get_spec("WebShop")
    assert "NOT the official" in spec.description
    for env_id in ("WebShop-Rubric-v0", "WebShop-Rubric-Eval-v0"):
        assert "not the official" in spec.env_id(env_id).description


@pytest.mark.parametrize("env_id", ["WebShop-Rubric-v0", "WebShop-Rubric-Eval-v0"])
def test_check_env(make_env, env_id):
    env = make_env(env_id, reward="none")
    check_env(env.unwrapped, skip_render_check=False)


def _oracle(env, task_ids):
    adapter = env.unwrapped.adapter
    scores = {}
    for task_id in task_ids:
        env.reset(seed=0, options={"task_id": task_id})
        actions = expert_actions(adapter)
        info, infos = play(env, task_id, actions)
        assert all(i["transition"].facts.accepted for i in infos), task_id
        assert len(infos) == len(actions) and info["transition"].terminated
        scores[task_id] = info["outcome"].score
        assert info["outcome"].success is (scores[task_id] == 1.0)
    return scores


def test_oracle_scores_one_on_a_few_goals(make_env):
    env = make_env(reward="none")
    assert set(_oracle(env, TRAIN[::12]).values()) == {1.0}


@pytest.mark.parametrize("env_id,task_ids", [("WebShop-Rubric-v0", TRAIN), ("WebShop-Rubric-Eval-v0", EVAL)])
def test_oracle_scores_one_on_every_bundled_goal(make_env, env_id, task_ids):
    env = make_env(env_id, reward="none")
    assert list(env.unwrapped.adapter.task_ids()) == task_ids
    scores = _oracle(env, task_ids)
    assert set(scores.values()) == {1.0}, {t: s for t, s in scores.items() if s != 1.0}


def _first_result_policy(env, task_id, with_options: bool):
    """Search with the instruction, open the first result, (optionally) click the instruction's
    option values that the page offers, buy."""
    obs, info = env.reset(seed=0, options={"task_id": task_id})
    _, _, _, _, info = env.step(f"<action>search[{info['instruction']}]</action>")
    first = info["transition"].facts.listed_products[0]
    _, _, _, _, info = env.step(f"<action>click[{first}]</action>")
    if with_options:
        offered = set(info["transition"].facts.option_values)
        for value in env.unwrapped.adapter.binding().options.values():
            if value in offered:
                _, _, _, _, info = env.step(f"<action>click[{value}]</action>")
    _, _, terminated, _, info = env.step("<action>click[buy now]</action>")
    assert terminated
    return info["outcome"].score


def test_buying_the_first_result_rarely_succeeds(make_env):
    """Figures quoted in docs/webshop.md."""
    env = make_env("WebShop-Rubric-Eval-v0", reward="none")
    plain = [_first_result_policy(env, t, False) for t in EVAL]
    assert sum(s == 1.0 for s in plain) / len(EVAL) <= 0.25
    assert max(plain) < 1.0  # without options no goal here can score 1.0
    with_options = [_first_result_policy(env, t, True) for t in EVAL]
    assert sum(s == 1.0 for s in with_options) / len(EVAL) <= 0.5
    print(f"first result: success {sum(s == 1.0 for s in plain)}/{len(EVAL)}, mean {sum(plain) / len(plain):.3f}; "
          f"with options: success {sum(s == 1.0 for s in with_options)}/{len(EVAL)}, "
          f"mean {sum(with_options) / len(with_options):.3f}")


def test_same_task_and_seed_give_the_same_episode(make_env, wrap):
    runs = []
    for _ in range(2):
        env = make_env("WebShop-Rubric-Eval-v0")
        obs, info = env.reset(seed=4, options={"task_id": EVAL[0]})
        out = [obs, info["admissible_actions"]]
        for action in expert_actions(env.unwrapped.adapter) + ["click[x]"]:
            step = env.step(wrap(action))
            out.append((step[0], step[1], step[4]["transition"].facts.model_dump(),
                        step[4]["trca"]["judgments"] if "trca" in step[4] else None))
            if step[2]:
                break
        runs.append(out)
    assert runs[0] == runs[1]
    env = make_env()
    a = env.reset(seed=1)[1]["task_id"]
    b = env.reset(seed=1)[1]["task_id"]
    assert a == b


def test_real_env_id_without_webshop_fails_clearly():
    if real_env_available():  # a user machine with WebShop's site package: the env must start
        env = gym.make("WebShop-Real-Rubric-v0")
        obs, info = env.reset(seed=0)
        assert "Instruction:" in obs
        env.close()
        return
    with pytest.raises(BenchmarkNotInstalled, match="web_agent_site") as err:
        gym.make("WebShop-Real-Rubric-v0")
    assert "WebShop-Rubric-v0" in str(err.value)  # points at the bundled engine


def test_unknown_engine_and_options_are_refused():
    with pytest.raises(ValueError, match="engine"):
        gym.make("WebShop-Rubric-v0", engine="other")
    with pytest.raises(TypeError, match="no options"):
        gym.make("WebShop-Rubric-v0", num_products=10)
