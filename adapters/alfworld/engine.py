"""alfworld's TextWorld engine: where games come from, starting and caching engines, the planner.

Games come from the official data when present, else the bundled set. Official layout
(alfworld's ``$ALFWORLD_DATA``): ``json_2.1.1/{train,valid_seen,valid_unseen}/<task folder>/
<trial>/{traj_data.json,game.tw-pddl}``. Games are filtered as alfworld's
``AlfredTWEnv.collect_game_files`` does (six task types, no movable/sliced, ``solvable``).
"""

from __future__ import annotations

import json
import os
import random
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BUNDLED_ROOT = Path(__file__).parent / "games"
# rubricgym split -> (bundled folder, official folder)
SPLITS = {"train": ("train", "train"), "eval": ("eval", "valid_seen"), "eval_unseen": ("eval", "valid_unseen")}
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)


ALFWORLD_DEFAULT_CACHE = Path("~/.cache/alfworld").expanduser()  # alfworld.info's default


def resolve_split_dir(split: str, data_path: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The folder to load games from, and its source label ("official", "path" or "bundled").
    A location the user names (``data_path``, ``$ALFWORLD_DATA``) must hold games: checked
    here, before alfworld is imported (its import creates the ``$ALFWORLD_DATA`` folder)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    bundled, official = SPLITS[split]
    if data_path is not None:
        root = Path(data_path).expanduser()
        for candidate in (root / "json_2.1.1" / official, root / official, root / bundled, root):
            if candidate.is_dir() and any(candidate.rglob("game.tw-pddl")):
                return candidate, "path"
        raise FileNotFoundError(f"no ALFWorld games (game.tw-pddl) for split {split!r} under {root}")
    env_root = os.environ.get("ALFWORLD_DATA")
    if env_root:
        candidate = Path(env_root).expanduser() / "json_2.1.1" / official
        if candidate.is_dir() and any(candidate.rglob("game.tw-pddl")):
            return candidate, "official"
        if Path(env_root).expanduser() == ALFWORLD_DEFAULT_CACHE:
            # alfworld's import sets $ALFWORLD_DATA to its default cache when unset: not a user's choice
            return BUNDLED_ROOT / bundled, "bundled"
        # a location the user named: games there, or a clear error (never a silent fallback)
        raise FileNotFoundError(
            f"$ALFWORLD_DATA={env_root} holds no ALFWorld games for split {split!r} (looked for "
            f"{candidate}/**/game.tw-pddl): point it at the folder that holds json_2.1.1/, pass data_path=, "
            "or unset ALFWORLD_DATA to play the bundled games")
    return BUNDLED_ROOT / bundled, "bundled"


def collect_games(split_dir: Path) -> dict[str, Path]:
    """task id (game folder relative to the split, '/'-separated) -> game file, sorted."""
    games: dict[str, Path] = {}
    for traj_path in sorted(split_dir.rglob("traj_data.json")):
        folder = traj_path.parent
        rel = folder.relative_to(split_dir).as_posix()
        game_file = folder / "game.tw-pddl"
        if "movable" in rel or "Sliced" in rel or not game_file.is_file():
            continue
        try:
            if json.loads(traj_path.read_text())["task_type"] not in TASK_TYPES:
                continue
            if not json.loads(game_file.read_text()).get("solvable", False):
                continue
        except (ValueError, KeyError):
            continue
        games[rel] = game_file
    return dict(sorted(games.items()))


@contextmanager
def seeded_global_random(seed: int | str) -> Iterator[None]:
    """alfworld/TextWorld draw from the global ``random`` (template phrasing, name shuffles):
    seed it for one call, then put the caller's state back."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def reset_seed(task_id: str, seed: int | None) -> int:
    """One integer per (task, seed): drives every draw alfworld/TextWorld make from ``random``."""
    return zlib.crc32(f"{task_id}:{seed}".encode())


def start_engine(game_file: Path, shuffle: bool, policy: bool = False) -> Any:
    """A TextWorld env for ``game_file`` with alfworld's wrappers, as ``AlfredTWEnv`` builds it;
    ``policy`` also asks for the planner's ``policy_commands`` (it re-plans on every step)."""
    # the engine loads at the first game: alfworld sets process-wide state on import
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from rubricgym.adapters.alfworld import downward_pool, parse_cache

    parse_cache.install()  # the same domain, grammar and templates in every game: parsed once
    downward_pool.install()  # one planner library per live engine, not a leaked copy per game
    infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=policy, extras=["gamefile"])
    return textworld.start(str(game_file), request_infos=infos,
                           wrappers=[AlfredDemangler(shuffle=shuffle), AlfredInfos])


def close_quietly(env: Any) -> None:
    """Close an engine; closing a broken one must not mask the real error."""
    try:
        env.close()
    except Exception:
        pass


class EngineCache:
    """Loaded engines by game file, least recently used closed first: loading a game parses
    the PDDL domain and grammar (seconds)."""

    def __init__(self, size: int):
        self.size = max(1, size)
        self._engines: OrderedDict[Path, Any] = OrderedDict()

    def get(self, game_file: Path, shuffle: bool) -> Any:
        """A loaded engine for ``game_file`` (fresh when names are shuffled per reset)."""
        if shuffle:
            self.drop(game_file)
        env = self._engines.pop(game_file, None)
        if env is None:
            env = start_engine(game_file, shuffle=shuffle)
        self._engines[game_file] = env
        while len(self._engines) > self.size:
            _, old = self._engines.popitem(last=False)
            old.close()
        return env

    def drop(self, game_file: Path) -> None:
        env = self._engines.pop(game_file, None)
        if env is not None:
            close_quietly(env)

    def close(self) -> None:
        while self._engines:
            close_quietly(self._engines.popitem()[1])


def planner_commands(game_file: Path, seed: int, shuffle: bool, replay: Sequence[str] = ()) -> list[str]:
    """The fast-downward planner's ``policy_commands`` after ``replay``, from an engine of its
    own (re-planning on every step is slow on big scenes, so the playing engine never pays)."""
    with seeded_global_random(seed):
        env = start_engine(game_file, shuffle=shuffle, policy=True)
    try:
        state = env.reset()
        for command in replay:
            state, _, _ = env.step(command)
        return list(state.policy_commands or [])
    finally:
        env.close()
