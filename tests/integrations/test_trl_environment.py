"""TRL's ``environment_factory`` route: a rubricgym env as TRL tools (one ``act`` tool for a
text env). The tiny model's first tool call is steered (TRL's tests script it too); TRL's
tool loop, the trainer and the env are real."""

from __future__ import annotations

import pytest
from integrations.scripted import reply_bias
from integrations.trl_setup import ENV_ID, need_trl_stack
from requirements_guard import need

CALL = '<tool_call>\n{"name": "act", "arguments": {"command": "look"}}\n</tool_call>'


def test_act_steps_the_env_and_keeps_the_records():
    need_trl_stack()
    from rubricgym.integrations.trl_rollout import MissingSeed
    from rubricgym.integrations.trl_tools import ENDED, rubricgym_environment

    env = rubricgym_environment(ENV_ID, max_steps=2)()
    with pytest.raises(MissingSeed, match="rubricgym_dataset"):
        env.reset(prompt="x")
    first = env.reset(seed=0, task_id=None)
    assert "Your task is to" in first and "admissible actions" in first
    env.act("look")
    assert env.act("inventory").endswith(ENDED) and env.act("look") == ENDED
    assert [r["command"] for r in env.step_records] == ["look", "inventory"]
    assert env.get_reward() == pytest.approx(sum(r["rubric"]["trca"]["reward"] for r in env.step_records))
    env._close()


def train_in_trls_tool_loop(tmp_path, environment, call: str, task: str, iterations: int) -> tuple[list, list]:
    """One TRL step (tiny model, G=2, LoRA) whose tool loop plays ``environment``, the first
    reply steered to ``call``; (the played environments, TRL's reward column)."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    from rubricgym.models import load_causal_lm

    model, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    tokenizer.chat_template = qwen3_chat_template  # a template TRL knows as tool-capable
    tokenizer = add_response_schema(tokenizer)
    config = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=1,
        max_completion_length=256, learning_rate=1e-2, use_cpu=True, bf16=False, report_to="none",
        save_strategy="no", logging_steps=1, seed=0, gradient_checkpointing=False,
        max_tool_calling_iterations=iterations, generation_kwargs=reply_bias(tokenizer, [call]),
    )
    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": task}], "seed": 0, "task_id": None}] * 2)
    trainer = GRPOTrainer(model=model, reward_funcs=[], args=config, processing_class=tokenizer, train_dataset=rows,
                          environment_factory=environment,
                          peft_config=LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, task_type="CAUSAL_LM",
                                                 target_modules=["q_proj", "v_proj"]))
    trainer.train()
    column = list(trainer._logs["rewards"]["RubricgymEnvironment"])
    assert len(column) == 2
    return trainer.environments, column


def replayed_reward(environment, played) -> float:
    """The episode's reward when its recorded calls are made again in this process."""
    replay = environment()
    replay.reset(seed=0, task_id=None)
    for record in played.step_records:
        getattr(replay, record["tool"])(**record["arguments"])
    reward = replay.get_reward()
    replay._close()
    return reward


@pytest.mark.slow
def test_trl_s_reward_column_equals_an_in_process_replay(tmp_path):
    need_trl_stack()
    from rubricgym.integrations.trl_tools import rubricgym_environment

    environment = rubricgym_environment(ENV_ID, max_steps=3)
    played_envs, column = train_in_trls_tool_loop(tmp_path, environment, CALL, "Play with the act tool.\n\n", 2)
    for played, reward in zip(played_envs, column, strict=True):
        commands = [r["command"] for r in played.step_records]
        assert commands and set(commands) == {"look"}
        assert all(r["rubric"]["trca"]["r_TRCA"] is not None for r in played.step_records)
        assert reward == pytest.approx(replayed_reward(environment, played)) and reward != 0.0


TAU_ID = "TauBench-Retail-Rubric-v0"
TAU_CALL = ('<tool_call>\n{"name": "find_user_id_by_name_zip", "arguments": {"first_name": "Yusuf", '
            '"last_name": "Rossi", "zip": "19122"}}\n</tool_call>')


@pytest.mark.slow
def test_tau_bench_s_own_tools_in_trl_give_the_reward_of_an_in_process_replay(tmp_path):
    """tau-bench's surface (the retail tools with tau2's schemas, plus ``respond``) in TRL's tool
    loop: the steered first call runs as that tool call, and TRL's reward column equals an
    in-process replay of the recorded calls."""
    need_trl_stack()
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from rubricgym.integrations.trl_tools import rubricgym_environment

    environment = rubricgym_environment(TAU_ID, max_steps=4)
    played_envs, column = train_in_trls_tool_loop(tmp_path, environment, TAU_CALL,
                                                  "Help the customer with the tools.\n\n", 1)
    for played, reward in zip(played_envs, column, strict=True):
        assert [r["tool"] for r in played.step_records][:1] == ["find_user_id_by_name_zip"]
        assert played.step_records[0]["arguments"] == {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}
        assert all("trca" in r["rubric"] for r in played.step_records)
        assert reward == pytest.approx(replayed_reward(environment, played)) and reward != 0.0
