"""TextWorld's parses, memoized (adapters/alfworld/parse_cache.py): the same games play out the
same with and without the cache, each caller gets its own copy, and a traced parse still runs."""

from __future__ import annotations

import pytest
from rubricgym.adapters.alfworld import parse_cache
from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT, collect_games

GAMES = sorted(collect_games(BUNDLED_ROOT / "train"))[:4]


def play(make_env, wrap) -> list:
    """Every observation, reward and step record of the expert walkthroughs of GAMES."""
    env = make_env("ALFWorld-Rubric-v0")
    adapter = env.unwrapped.adapter
    seen: list = []
    for task_id in GAMES:
        obs, _ = env.reset(seed=0, options={"task_id": task_id})
        seen.append(obs)
        for command in adapter.expert_plan():
            obs, reward, terminated, _, info = env.step(wrap(command))
            seen.append((obs, reward, terminated, info["transition"].facts.model_dump()))
    return seen


@pytest.mark.slow
def test_the_walkthroughs_are_the_same_with_textworlds_own_parsers(make_env, wrap, monkeypatch):
    from textworld.envs.pddl import textgen

    cached = play(make_env, wrap)
    assert textgen._parse_and_convert.cache_info().hits > 0  # the cache served these games
    parse_cache.uninstall()
    monkeypatch.setattr(parse_cache, "install", lambda: None)  # engines started next use TextWorld's own
    try:
        plain = play(make_env, wrap)
    finally:
        monkeypatch.undo()
        parse_cache.install()
    assert len(cached) > 4 * 3 and cached == plain


def test_each_caller_gets_its_own_copy_and_a_text_is_parsed_once():
    calls: list[tuple] = []

    def parse(text, rule_name=None, trace=False):
        calls.append((text, rule_name, trace))
        return [{"symbol": text, "context": {}}]

    cached = parse_cache.memoized(parse)
    first, second = cached("#a# b", rule_name="symbols"), cached("#a# b", rule_name="symbols")
    assert first == second and first is not second and first[0]["context"] is not second[0]["context"]
    first[0]["context"]["state"] = "mutated by a caller"
    assert cached("#a# b", rule_name="symbols")[0]["context"] == {}
    assert calls == [("#a# b", "symbols", False)]
    cached("#a# b", rule_name="other")
    cached("#a# b", rule_name="symbols", trace=True)  # tatsu's trace: always parsed
    assert calls[1:] == [("#a# b", "other", False), ("#a# b", "symbols", True)]
    assert cached.cache_info().hits == 2 and cached.cache_info().misses == 2


def test_the_cache_is_bounded_and_a_games_domain_is_kept_only_while_in_play():
    calls: list[str] = []
    cached = parse_cache.memoized(lambda text, rule_name=None: calls.append(text) or text, max_texts=2)
    for text in ("a", "b", "a", "c", "a", "b"):  # "b" was dropped when "c" came: parsed again
        cached(text, rule_name="r")
    assert calls == ["a", "b", "c", "b"] and cached.cache_info().currsize == 2
    parse_cache.install()
    from textworld.envs.pddl import logic

    # one large parse per game: official ALFWorld's thousands of games must not all stay in memory
    assert logic._parse_and_convert.cache_info().maxsize <= 64


def test_install_is_idempotent_and_uninstall_restores_textworlds_parsers():
    from textworld.envs.pddl import textgen

    parse_cache.install()
    installed = textgen._parse_and_convert
    parse_cache.install()
    assert textgen._parse_and_convert is installed and hasattr(installed, "cache_info")
    parse_cache.uninstall()
    try:
        assert not hasattr(textgen._parse_and_convert, "cache_info")
    finally:
        parse_cache.install()
