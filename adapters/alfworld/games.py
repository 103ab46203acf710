"""Where ALFWorld games come from: the official data when present, else the bundled set.

Official layout (alfworld's ``$ALFWORLD_DATA``): ``json_2.1.1/{train,valid_seen,valid_unseen}/
<task folder>/<trial>/{traj_data.json,game.tw-pddl}``. Games are filtered as alfworld's
``AlfredTWEnv.collect_game_files`` does (six task types, no movable/sliced, ``solvable``).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def resolve_split_dir(split: str, data_path: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The folder to load games from, and its source label ("official", "path" or "bundled")."""
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
