"""The WebShop operator library on real episodes: oracle episodes fire every Evidence and
Execution operator and no Invalidity operator; fuzzed actions never crash, are classified,
and fire every Invalidity operator; on fuzzed browsing no two operators of a category fire on
the same steps."""

from __future__ import annotations

import random
from collections import defaultdict

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webshop.webshop_play import wrap_action

from rubricgym.adapters.webshop.catalogue import bundled_catalogue
from rubricgym.adapters.webshop.expert import expert_actions
from rubricgym.trca.validate import load_library

LIBRARY = load_library("operator_libraries/webshop.yaml")
BY_CATEGORY = defaultdict(list)
for _op in LIBRARY.operators:
    BY_CATEGORY[_op.category].append(_op.id)
GOALS = bundled_catalogue().goals
TRAIN = [g.goal_id for g in GOALS if g.split == "train"]
EVAL = [g.goal_id for g in GOALS if g.split == "eval"]


def _record(fired, episode, info):
    step = info["transition"].step
    for op_id, value in info["trca"]["judgments"].items():
        if value:
            fired[op_id].add((episode, step))


def _oracle_firings(env_id, task_ids):
    env = gym.make(env_id)
    fired = defaultdict(set)
    try:
        for task_id in task_ids:
            env.reset(seed=0, options={"task_id": task_id})
            for action in expert_actions(env.unwrapped.adapter):
                _, _, terminated, _, info = env.step(wrap_action(action))
                assert not info["trca"]["errors"], info["trca"]["errors"]
                _record(fired, task_id, info)
            assert terminated and info["outcome"].success, task_id
    finally:
        env.close()
    return fired


def _assert_distinct_within_categories(fired, categories):
    for category in categories:
        ids = [i for i in BY_CATEGORY[category] if fired.get(i)]
        for a in range(len(ids)):
            for b in range(a + 1, len(ids)):
                assert fired[ids[a]] != fired[ids[b]], f"{ids[a]} and {ids[b]} fire on exactly the same steps"


def _check_oracle(fired):
    for category in ("evidence", "execution"):
        for op_id in BY_CATEGORY[category]:
            assert fired.get(op_id), f"{op_id} never fired on oracle episodes"
    for op_id in BY_CATEGORY["invalidity"]:
        assert not fired.get(op_id), f"{op_id} fired on an oracle episode: {sorted(fired[op_id])[:3]}"


def test_oracle_fires_evidence_and_execution_only_on_a_few_goals():
    _check_oracle(_oracle_firings("WebShop-Rubric-v0", TRAIN[::10]))


def test_oracle_fires_evidence_and_execution_only_on_every_goal():
    fired = _oracle_firings("WebShop-Rubric-v0", TRAIN)
    for op_id, steps in _oracle_firings("WebShop-Rubric-Eval-v0", EVAL).items():
        fired[op_id] |= steps
    _check_oracle(fired)



def test_browsing_in_circles_pays_evidence_and_execution_once():
    """Evidence is new information: the oracle's path walked a second time (back to the
    results, the same product, sub-page and options again) fires no Evidence or Execution
    operator, so r_F cannot be farmed by browsing in circles; the purchase still fires."""
    env = gym.make("WebShop-Rubric-v0")
    paying = set(BY_CATEGORY["evidence"]) | set(BY_CATEGORY["execution"])
    try:
        env.reset(seed=0, options={"task_id": TRAIN[0]})
        oracle = expert_actions(env.unwrapped.adapter)
        browse = oracle[next(i for i, a in enumerate(oracle) if a.startswith("click[b")):-1]  # open .. options
        passes = []
        for actions in (oracle[:-1], ["click[< prev]", *browse], oracle[-1:]):
            fired = set()
            for action in actions:
                _, _, terminated, _, info = env.step(wrap_action(action))
                assert info["transition"].facts.accepted, action
                fired |= {op for op, value in info["trca"]["judgments"].items() if value and op in paying}
            passes.append(fired)
        first, again, buy = passes
        assert {"type_product_opened", "goal_option_selected", "searched_for_type"} <= first
        assert again == set(), f"operators paid again for pages already seen: {sorted(again)}"
        assert terminated and "bought_matching_product" in buy
    finally:
        env.close()

# -- fuzz ---------------------------------------------------------------------------------
JUNK = ["", "buy", "search[]", "click[]", "Click[buy now]", "search[shoes", "click[search]", "click[zzz]",
        "click[b0xxxxxxxx]", "<action>", "search[" + "a" * 700 + "]", "click[\u00e9\u00e8]", "search[\x00]"]


def _fuzz_action(rng: random.Random, env) -> str:
    """Mostly plausible actions (clickables of the page, searches), some junk, some repeats."""
    state = env.unwrapped._state
    admissible = [a for a in (state.admissible_actions or []) if not a.startswith("search[<")]
    roll = rng.random()
    if roll < 0.55 and admissible:
        action = rng.choice(admissible)
    elif roll < 0.7:
        words = rng.sample(["blue", "shoes", "coffee", "yoga", "mat", "candle", "zzz", "socks", "black"], 2)
        action = f"search[{' '.join(words)}]"
    else:
        action = rng.choice(JUNK)
    if rng.random() < 0.1:  # responses that do not parse at all
        return rng.choice(["no tags here", "<action>click[x]", "<action>a</action><action>b</action>",
                           "<action> </action>"])
    return wrap_action(action)


def _classified(t) -> None:
    f = t.facts
    assert t.error is None, t.error  # the engine itself never broke
    if not f.parsed:
        assert f.parse_error and not f.accepted and f.rejected
        return
    assert f.action_kind in ("search", "click", "other")
    refused = f.action_kind == "other" or f.click_rejected
    assert f.accepted is (not refused) and f.rejected is refused
    assert bool(f.error_text) is refused
    if refused:
        assert not f.state_changed  # a no-op leaves the page as it was
    assert f.page in ("search", "results", "item", "description", "features", "reviews", "done")


def test_seeded_fuzz_fires_every_invalidity_operator():
    env = gym.make("WebShop-Rubric-v0")
    rng = random.Random(7)
    fired = defaultdict(set)
    try:
        for episode in range(40):
            env.reset(seed=episode, options={"task_id": TRAIN[episode % len(TRAIN)]})
            previous = None
            for _ in range(14):
                action = previous if previous and rng.random() < 0.15 else _fuzz_action(rng, env)
                _, _, terminated, truncated, info = env.step(action)
                _classified(info["transition"])
                _record(fired, episode, info)
                previous = action
                if terminated or truncated:
                    break
    finally:
        env.close()
    for op_id in BY_CATEGORY["invalidity"]:
        assert fired.get(op_id), f"{op_id} never fired on fuzz"
    # the oracle opens a matching product once, so its Evidence arrives together; browsing tells them apart
    _assert_distinct_within_categories(fired, ("invalidity", "evidence", "execution"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.text(max_size=60),
    st.builds(lambda s: f"<action>search[{s}]</action>", st.text(max_size=40)),
    st.builds(lambda s: f"<action>click[{s}]</action>", st.text(max_size=20)),
    st.sampled_from([wrap_action(j) for j in JUNK] + [wrap_action("click[back to search]"),
                                                       wrap_action("click[< prev]"), wrap_action("click[next >]")]),
), min_size=1, max_size=12))
def test_arbitrary_responses_never_crash_and_are_classified(responses):
    env = gym.make("WebShop-Rubric-v0")
    try:
        env.reset(seed=0, options={"task_id": TRAIN[0]})
        for response in responses:
            obs, reward, terminated, truncated, info = env.step(response)
            assert isinstance(obs, str)
            _classified(info["transition"])
            if terminated or truncated:
                break
    finally:
        env.close()
