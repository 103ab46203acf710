"""What a new user runs into first: shipped libraries by name, `| head`, `serve-llm` without
the llama.cpp venv, the top-level help, and `--resume` of a finished run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rubricgym.cli import main

ROOT = Path(__file__).resolve().parents[2]


def rubricgym(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rubricgym.cli", *args], check=False, capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name", ["alfworld", "ALFWorld", "alfworld.yaml", "ALFWorld-Rubric-v0"])
def test_show_resolves_shipped_names(name, capsys):
    assert main(["library", "show", name]) == 0
    assert "alfworld-default  benchmark=ALFWorld" in capsys.readouterr().out


def test_validate_resolves_shipped_names(capsys):
    assert main(["library", "validate", "alfworld", "--env", "ALFWorld-Rubric-v0"]) == 0
    assert ": OK against ALFWorld-Rubric-v0" in capsys.readouterr().out


def test_show_into_head_has_no_traceback():
    result = subprocess.run(f"'{sys.executable}' -m rubricgym.cli library show alfworld | head -n 1", shell=True, check=False,
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.stdout.startswith("alfworld-default")
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr


def test_serve_llm_without_the_llama_venv_says_how_to_get_it(tmp_path):
    result = rubricgym("serve-llm", env={"RUBRICGYM_LLAMA_PYTHON": str(tmp_path / "no" / "python")})
    assert result.returncode == 2
    assert "make judge-server" in result.stderr and "Traceback" not in result.stderr


def test_top_level_help_lists_the_authoring_commands():
    result = rubricgym("--help")
    assert result.returncode == 0
    assert "serve-llm" in result.stdout and "generate, validate, test and diff" in result.stdout
    assert "Run `rubricgym COMMAND --help`" in result.stdout
    sub = rubricgym("library", "--help")
    for action in ("validate", "show", "generate", "record", "test", "diff"):
        assert action in sub.stdout


@pytest.mark.slow
def test_resume_of_a_finished_run_says_it_is_complete(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "tests"))  # the trainer tests' tiny word env: trainer.word_env
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    settings = ["model.name=tiny", "env.factory=word", "env.max_steps=2",
                "algorithm.advantage=grpo", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
                "generation.max_new_tokens=4", "prompt.max_prompt_tokens=40", "run.iterations=1",
                "run.progress=false", "run.evaluate_after=false"]
    trainer = Trainer(load_config(None, settings), tmp_path / "run")
    trainer.train()
    trainer.close()
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text()
    assert main(["train", "--resume", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "is already complete (1/1 iterations)" in out and "Trained" not in out
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == metrics  # nothing was trained again
