"""``rubricgym demo`` plays bundled games with the scripted policy and shows Invalidity facts."""

from __future__ import annotations

from rubricgym.cli import main


def test_demo_plays_and_shows_invalidity_facts(capsys):
    assert main(["demo", "--env", "ALFWorld-Rubric-v0", "--games", "1", "--plain", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for needle in ("parse_error = missing_tag", "nothing_happens = True", "repeated = True",
                   "outcome: success=True", "1/1 tasks won"):
        assert needle in out, needle
