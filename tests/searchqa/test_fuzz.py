"""Fuzz: bad responses fire every Invalidity operator (never an Evidence or Execution one),
and arbitrary text never crashes an episode or leaves the reward bounds."""

from __future__ import annotations

import collections

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchqa.support import GRAMMARS
from rubricgym.registration import operator_library
from rubricgym.trca import load_library

LIBRARY = load_library(operator_library("SearchQA"))
INVALIDITY = {o.id for o in LIBRARY.operators if o.category == "invalidity"}
B = LIBRARY.library.budgets

BAD = {
    "search-r1": ["no tags at all", "<search>unclosed", "<search>   </search>", "<search><answer>x</answer></search>",
                  "<search>" + "long " * 80 + "</search>", "<search>?!</search>",
                  "<search>river town</search>", "<search>River, town!</search>", "<search>town river</search>",
                  "<search>zzqx unknownword</search>"],
    "trca": ["<action>look around</action>", "<action>open[two]</action>", "<action>open[1]</action>",
             "<action>read[1]</action>", "<action>search[river town]</action>", "<action>open[9]</action>",
             "<action>search[river town]</action>", "<action>search[town river]</action>", "<action></action>",
             "<action>search[a]</action><action>search[b]</action>"],
}


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_bad_responses_fire_invalidity_only(grammar):
    env = gym.make("SearchQA-Rubric-v0", grammar=grammar, max_turns=20)
    env.reset(seed=1, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    fired: collections.Counter[str] = collections.Counter()
    for response in BAD[grammar]:
        _, _, terminated, truncated, info = env.step(response)
        on = {i for i, v in info["trca"]["judgments"].items() if v}
        fired.update(on)
        if on & INVALIDITY:
            assert info["trca"]["r_F"] < 0, (response, on)
        assert not terminated and not truncated, response
    expected = INVALIDITY - ({"unavailable_action"} if grammar == "search-r1" else set())  # Search-R1 has no open/read
    assert expected <= set(fired), f"{grammar}: never fired {expected - set(fired)}"
    env.close()


def test_every_invalidity_operator_fires_across_the_grammars():
    fired = set()
    for grammar in GRAMMARS:
        env = gym.make("SearchQA-Rubric-v0", grammar=grammar, max_turns=20)
        env.reset(seed=1, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
        for response in BAD[grammar]:
            fired |= {i for i, v in env.step(response)[4]["trca"]["judgments"].items() if v}
        env.close()
    assert INVALIDITY <= fired


PIECES = st.sampled_from(["<search>", "</search>", "<answer>", "</answer>", "<action>", "</action>", "<think>",
                          "</think>", "search[", "open[", "read[", "answer[", "]", "1", "3", "river", "born", " ",
                          "Who", "\n", "<information>", "\x00", "é"])


@pytest.mark.parametrize("grammar", GRAMMARS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(responses=st.lists(st.one_of(st.lists(PIECES, max_size=12).map("".join), st.text(max_size=60)), min_size=1, max_size=6))
def test_arbitrary_responses_never_crash(grammar, responses):
    env = gym.make("SearchQA-Rubric-Eval-v0", grammar=grammar, max_turns=4)
    env.reset(seed=0)
    for response in responses:
        obs, reward, terminated, truncated, info = env.step(response)
        assert isinstance(obs, str) and "environment_failure" not in info
        r_trca = info["trca"]["r_TRCA"]
        assert -(1 - LIBRARY.library.lam) * abs(B.r_inval) - 1e-9 <= r_trca <= B.r_evi + B.r_exec + 1e-9
        if terminated or truncated:
            break
    env.close()
