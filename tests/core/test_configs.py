"""Every shipped config says which model it loads, and loads that one (issue 49, item 5): the
first comment line naming ``Model:`` must match what ``model.name`` resolves to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rubricgym.models import SMOLLM2_ALIASES, SMOLLM2_NAME
from rubricgym.trainers.config import load_config

ALL_CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
CHOICE_STUDIES = [p for p in ALL_CONFIGS if p.name.startswith("study_choice_")]  # no LLM: their own schema
CONFIGS = [p for p in ALL_CONFIGS if p not in CHOICE_STUDIES]
STATED = re.compile(r"^# Model: (\S+)", re.MULTILINE)


def _loads(name: str) -> str:
    """The model a ``model.name`` loads: SmolLM2's packaged GGUF for its aliases, else the
    folder (its name is the model's)."""
    return SMOLLM2_NAME if name.lower() in SMOLLM2_ALIASES else Path(name).name


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_the_config_names_the_model_it_loads(path):
    header = "".join(line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                     if line.startswith("#"))
    stated = STATED.search(header)
    assert stated, f"{path.name}: say which model it loads in a '# Model: NAME' line"
    config = load_config(path)
    assert _loads(config.model.name) == stated.group(1), path.name
    if "paper" not in path.name:
        assert "paper scale" not in header.lower() or "not paper scale" in header.lower(), path.name


@pytest.mark.parametrize("path", CHOICE_STUDIES, ids=[p.name for p in CHOICE_STUDIES])
def test_a_choice_study_config_says_it_loads_no_model_and_loads(path):
    from rubricgym.trainers.study.choice import load_choice_study

    assert STATED.search(path.read_text(encoding="utf-8")).group(1) == "none", path.name
    assert load_choice_study(path).seeds, path.name


def test_the_paper_config_has_the_papers_values():
    """The values docs/design.md ("Fidelity") attributes to the TRCA paper."""
    config = load_config(Path(CONFIGS[0]).parent / "alfworld_trca_paper_gpu.yaml")
    alg = config.algorithm
    assert config.model.name == "Qwen2.5-1.5B-Instruct" and config.env.max_steps == 25
    assert (alg.group_size, alg.tasks_per_iteration, alg.lr) == (8, 16, 8e-7)
    assert (alg.clip_low, alg.clip_high, alg.kl_coef, alg.entropy_coef) == (0.20, 0.28, 0.012, 0.001)
    assert (config.generation.max_new_tokens, config.generation.temperature) == (512, 1.0)
    assert config.estimator.name == "trca" and config.estimator.objective.loss_aggregation == "rollout_mean_step_mean"
