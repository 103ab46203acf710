"""``rubricgym serve-env`` refuses what it cannot serve before starting anything."""

from __future__ import annotations

from rubricgym.cli import main


def test_an_unknown_env_id_is_refused_with_the_nearest_ids(capsys):
    assert main(["serve-env", "ALFWorld-Rubric-v9", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "unknown env id 'ALFWorld-Rubric-v9'" in err and "did you mean ALFWorld-Rubric-v0" in err


def test_env_options_must_be_a_json_object(capsys):
    assert main(["serve-env", "SearchQA-Rubric-v0", "--kwargs", "[1, 2]"]) == 2
    assert "--kwargs must be a JSON object" in capsys.readouterr().err
