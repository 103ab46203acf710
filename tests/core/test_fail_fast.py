"""Commands fail before any work starts, in one format (issue 53, item 2): what is wrong, the
value given, the fix; no traceback, no pydantic text, exit 2, no empty run folder left behind.
``rubricgym eval``'s side is ``tests/eval/test_eval_setup.py``."""

from __future__ import annotations

from importlib import metadata

import pytest
from requirements_guard import need

from rubricgym.cli import main
from rubricgym.trainers.config import load_config, nearest_settings, TrainConfig


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rubricgym {metadata.version('rubricgym')}"


@pytest.mark.parametrize("key, near", [("lr", "algorithm.lr"), ("model.lr", "algorithm.lr"), ("seed", "run.seed"),
                                       ("grup_size", "algorithm.group_size"), ("lora.rr", "lora.r")])
def test_an_unknown_key_names_the_nearest_setting_in_any_section(key, near):
    assert nearest_settings(TrainConfig, key.rpartition(".")[0] + "." if "." in key else "",
                            key.rpartition(".")[2])[0] == near
    with pytest.raises(ValueError, match=rf"unknown setting '{key}': did you mean {near}\b"):
        load_config(None, [f"{key}=3"])


def test_train_refusals_are_one_line_with_the_value_and_the_fix(capsys):
    assert main(["train", "--set", "lr=1e-5", "--print-config"]) == 2
    assert "did you mean algorithm.lr" in capsys.readouterr().err
    assert main(["train", "--set", "algorithm.lr=-1", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "algorithm.lr: Input should be greater than 0 (given: -1). Fix: rubricgym train --print-config" in err, err
    assert "pydantic" not in err and "validation error" not in err and len(err.strip().splitlines()) == 1, err
    assert main(["train", "--dry-run", "--set", "model.name=no-such-model"]) == 2
    assert "model.name is neither a known model name nor a folder (given: no-such-model). Fix:" in \
        capsys.readouterr().err


def test_train_with_a_bad_data_location_leaves_no_run_folder(tmp_path, capsys, monkeypatch):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "typo"))
    assert main(["train", "--set", "model.name=tiny", "--output-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "holds no ALFWorld games" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no runs/ folder, no empty run folder in it
