"""Bad input to the TRL integration: each error names the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest
from integrations.trl_setup import make_trainer, need_trl_stack


def test_trl_not_installed_names_the_extra():
    code = "import sys; sys.modules['trl'] = None; import rubricgym.integrations.trl"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "pip install 'rubricgym[trl]'" in done.stderr


def test_an_unknown_env_id_names_the_nearest_ones():
    need_trl_stack()
    from rubricgym.integrations.trl import rubricgym_rollout_func
    from rubricgym.registration import UnknownBenchmark

    with pytest.raises(UnknownBenchmark, match="ALFWorld-Rubric-v0"):
        rubricgym_rollout_func("ALFWorld-Rubrik-v0")


def test_a_draco_estimator_without_a_judge_is_refused_before_training(tmp_path):
    need_trl_stack()
    with pytest.raises(ValueError, match="DRACO judge"):
        make_trainer(tmp_path, estimator="draco")


@pytest.mark.slow
def test_a_row_without_a_seed_names_the_fix(tmp_path):
    need_trl_stack()
    from datasets import Dataset

    from rubricgym.integrations.trl import MissingSeed

    rows = Dataset.from_list([{"prompt": "an ALFWorld task", "task_id": None}] * 2)
    trainer = make_trainer(tmp_path, dataset=rows, groups=1)
    with pytest.raises(MissingSeed, match="rubricgym_dataset"):
        trainer.train()


@pytest.mark.slow
def test_the_rollout_in_a_plain_grpo_trainer_names_rubric_grpo_trainer(tmp_path):
    need_trl_stack()
    from trl import GRPOTrainer

    from rubricgym.integrations.trl import episode_return

    template = make_trainer(tmp_path, groups=1)  # the same model, config, data and rollout
    plain = GRPOTrainer(model=template.model, reward_funcs=[episode_return], args=template.args,
                        processing_class=template.processing_class, train_dataset=template.train_dataset,
                        rollout_func=template.rollout_func)
    with pytest.raises(TypeError, match="RubricGRPOTrainer"):
        plain.train()


def test_the_window_prompt_style_is_refused_with_the_style_that_works():
    """An episode is one growing sequence here; 'window' prompts cannot be one (it used to fail
    with an IndexError at the second turn)."""
    need_trl_stack()
    from rubricgym.integrations.trl import rubricgym_rollout_func
    from rubricgym.prompts import PromptSettings

    with pytest.raises(ValueError, match="style 'chat'"):
        rubricgym_rollout_func("ALFWorld-Rubric-v0", prompt=PromptSettings(style="window"))
    assert rubricgym_rollout_func("ALFWorld-Rubric-v0", prompt=PromptSettings(style="chat")).prompt.style == "chat"
