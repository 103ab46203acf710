"""The game generator is deterministic, and the bundled set is exactly what it generates."""

from __future__ import annotations

import json

import pytest

from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT, collect_games
from rubricgym.adapters.alfworld.generate import TASK_TYPES, generate_split, main


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_games_other_seed_other_games(tmp_path):
    for name, seed in (("a", 4), ("b", 4), ("c", 5)):
        assert main(["--out", str(tmp_path / name), "--seed", str(seed), "--n", "6", "--splits", "train",
                     "--no-verify"]) == 0
    a, b, c = (_tree(tmp_path / n) for n in "abc")
    assert a == b and a != c
    assert {k.split("/")[2].split("-")[0] for k in a} == set(TASK_TYPES)


def test_bundled_games_are_official_format_and_marked_solvable():
    from alfworld.info import ALFRED_PDDL_PATH

    domain = open(ALFRED_PDDL_PATH).read()
    for split in ("train", "eval"):
        games = collect_games(BUNDLED_ROOT / split)
        assert games
        for task_id, game_file in games.items():
            game = json.loads(game_file.read_text())
            traj = json.loads((game_file.parent / "traj_data.json").read_text())
            assert game["solvable"] is True and game["walkthrough"]
            assert game["pddl_domain"] == domain
            assert "UNKNOWN GOAL" not in game["grammar"]
            assert set(traj["pddl_params"]) >= {"object_target", "parent_target", "toggle_target",
                                                "mrecep_target", "object_sliced"}
            assert task_id.startswith(traj["task_type"] + "-")


@pytest.mark.slow
def test_bundled_eval_split_regenerates_byte_for_byte(tmp_path):
    generate_split(tmp_path / "eval", seed=0, n=12, label="eval")
    assert _tree(tmp_path / "eval") == _tree(BUNDLED_ROOT / "eval")
