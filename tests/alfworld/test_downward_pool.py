"""The planner library is reused, not leaked (adapters/alfworld/downward_pool.py): engines
started one after another load no new copy of ``libdownward.so``, two live engines
never share one, and a game played on a library another game used plays as on a fresh one."""

from __future__ import annotations

import gc
from pathlib import Path

from rubricgym.adapters.alfworld import downward_pool
from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT, collect_games, start_engine

GAMES = list(collect_games(BUNDLED_ROOT / "train").values())[:2]


def deleted_copies_mapped() -> int:
    """Mappings of deleted ``libdownward.so`` copies in this process (what filled the disk)."""
    return sum(1 for line in Path("/proc/self/maps").read_text().splitlines()
               if "libdownward" in line and "(deleted)" in line)


def walkthrough(game: Path) -> list[str]:
    """Every observation of the planner's walkthrough of ``game``, on an engine of its own."""
    env = start_engine(game, shuffle=False, policy=True)
    try:
        state = env.reset()
        seen = [state.feedback]
        while not state.won and len(seen) < 60:
            state, _, _ = env.step(state.policy_commands[0])
            seen.append(state.feedback)
        assert state.won
        return seen
    finally:
        env.close()
        del env
        gc.collect()


def test_engines_started_in_turn_load_one_library_between_them():
    for game in GAMES:  # TextWorld keeps its last loaded game alive a while (a frame): one spare
        start_engine(game, shuffle=False).close()
        gc.collect()
    loaded, mapped = downward_pool.loaded_libraries(), deleted_copies_mapped()
    for game in GAMES * 3:
        start_engine(game, shuffle=False).close()
        gc.collect()
    assert downward_pool.loaded_libraries() == loaded
    assert deleted_copies_mapped() == mapped


def test_live_engines_have_their_own_library():
    first = start_engine(GAMES[0], shuffle=False)
    second = start_engine(GAMES[1], shuffle=False)
    assert first.downward_lib is not second.downward_lib
    first.close()
    second.close()


def test_a_reused_library_plays_a_game_as_a_fresh_one():
    before = downward_pool.loaded_libraries()
    fresh = walkthrough(GAMES[0])
    walkthrough(GAMES[1])  # the library now held the other game's problem
    again = walkthrough(GAMES[0])
    assert downward_pool.loaded_libraries() - before <= 2
    assert len(fresh) > 2 and again == fresh
