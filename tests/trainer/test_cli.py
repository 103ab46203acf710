"""``rubricgym train`` configuration: embedded defaults, YAML + overrides, clear errors."""

from __future__ import annotations

import pytest

from rubricgym.cli import main
from rubricgym.trainers.config import TrainConfig, load_config, parse_override


def test_embedded_defaults_are_the_main_job():
    cfg = TrainConfig()
    assert cfg.model.name == "smollm2" and cfg.env.id == "ALFWorld-Rubric-v0"
    assert cfg.algorithm.advantage == "trca"
    assert (cfg.algorithm.clip_low, cfg.algorithm.clip_high) == (0.20, 0.28)
    assert (cfg.algorithm.kl_coef, cfg.algorithm.entropy_coef) == (0.012, 0.001)


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algorithm:\n  group_size: 6\n  advantage: grpo\nlora:\n  target_modules: [q_proj]\n")
    cfg = load_config(path, ["algorithm.group_size=8", "run.name=x", "lora.target_modules=[q_proj, v_proj]"])
    assert cfg.algorithm.group_size == 8 and cfg.algorithm.advantage == "grpo"
    assert cfg.run.name == "x" and cfg.lora.target_modules == ["q_proj", "v_proj"]


@pytest.mark.parametrize("bad", ["algorithm.advantage=ppo", "algorithm.nope=1", "algorithm.group_size=0",
                                 "algorithm.group_size=abc"])
def test_bad_settings_are_rejected(bad):
    with pytest.raises(ValueError):
        load_config(None, [bad])


def test_override_syntax():
    assert parse_override("a.b=1.5") == ("a.b", 1.5)
    assert parse_override("a=true") == ("a", True)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_override("no-equals")


def test_cli_prints_resolved_config(capsys):
    assert main(["train", "--print-config", "--iterations", "7", "--advantage", "grpo"]) == 0
    out = capsys.readouterr().out
    assert "iterations: 7" in out and "advantage: grpo" in out


def test_cli_bad_config_exits_2(capsys):
    assert main(["train", "--set", "algorithm.advantage=ppo", "--print-config"]) == 2
    assert "unknown advantage estimator" in capsys.readouterr().err


def test_cli_resume_of_missing_run_exits_2(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert "no such run folder" in err and str(tmp_path / "nothing") in err


def test_a_collective_failing_inside_the_model_stops_with_the_resume_hint(tmp_path, capsys, monkeypatch):
    """FSDP and ZeRO-3 gather weights in hooks the trainer does not wrap: their failure (a dead
    rank) is a stop with exit code 3 and the resume command, not a traceback."""
    from torch.distributed import DistError

    from rubricgym.trainers.trainer import Trainer

    def lost_rank(self, **kwargs):
        raise DistError("Connection reset by peer")

    monkeypatch.setattr(Trainer, "train", lost_rank)
    code = main(["train", "--set", "model.name=tiny", "--set", "env.factory=word",
                 "--set", "run.tensorboard=false", "--set", "run.progress=false", "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "a collective inside the model failed" in err and "Connection reset by peer" in err
    assert "rubricgym train --resume" in err
