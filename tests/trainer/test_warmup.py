"""Format warm-up: behaviour cloning on expert demonstrations, response tokens only, once per run."""

from __future__ import annotations

import json

import pytest
import torch

from rubricgym.models import load_causal_lm
from rubricgym.prompts import PromptSettings
from rubricgym.registration import has_expert
from rubricgym.trainers.config import WarmupSettings, load_config
from rubricgym.trainers.generation import stop_token_ids
from rubricgym.trainers.trainer import WARMUP_FILE, Trainer
from rubricgym.trainers.warmup import as_sample, collect_demonstrations, demonstration_response, run_warmup, sft_loss
from trainer.word_env import make_expert_word_env, make_word_env

SETTINGS = [
    "model.name=tiny", "env.factory=expert-word", "env.max_steps=2",
    "env.kwargs={num_tasks: 4}", "algorithm.advantage=grpo", "algorithm.group_size=2",
    "algorithm.tasks_per_iteration=1", "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40",
    "warmup.steps=3", "warmup.games=2", "run.iterations=2", "run.progress=false", "run.evaluate_after=false",
    "run.keep_checkpoints=5",
]


def _tiny():
    from peft import LoraConfig, get_peft_model

    model, tok = load_causal_lm("tiny", seed=0)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    return get_peft_model(model, lora), tok


def _demos(tok, model):
    prompt = PromptSettings(max_prompt_tokens=40)
    return collect_demonstrations(lambda: make_expert_word_env(max_steps=2, num_tasks=3), tok, prompt,
                                  ["pick-0", "pick-1", "pick-2"], seed=0, stop_ids=stop_token_ids(tok, model))


def test_demonstrations_replay_the_expert_through_the_env():
    model, tok = _tiny()
    demos = _demos(tok, model)
    assert [d.task_id for d in demos] == ["pick-0", "pick-1", "pick-2"]  # one accepted winning step each
    assert all(d.response_text.endswith("<action>apple</action>") and "<think>" in d.response_text for d in demos)
    assert all(d.response_ids[-1] == tok.eos_token_id for d in demos)  # learns to stop


def test_task_reasoning_restates_the_instruction_before_the_action():
    model, tok = _tiny()
    env = make_expert_word_env(max_steps=2, num_tasks=3)
    _, info = env.reset(seed=0, options={"task_id": "pick-1"})
    instruction = info["instruction"]
    env.close()
    prompt = PromptSettings(max_prompt_tokens=40)
    demos = collect_demonstrations(lambda: make_expert_word_env(max_steps=2, num_tasks=3), tok, prompt, ["pick-1"],
                                   seed=0, stop_ids=stop_token_ids(tok, model), reasoning="task")
    plain = _demos(tok, model)[1]
    assert [d.task_id for d in demos] == ["pick-1"] and plain.task_id == "pick-1"
    assert demos[0].response_text == (f"<think>My task is to: {instruction.strip()} I should apple.</think>"
                                      "<action>apple</action>")
    assert plain.response_text == "<think>I should apple.</think><action>apple</action>"
    assert demos[0].prompt_ids == plain.prompt_ids  # only the reply changes
    assert demonstration_response("look", task="  ") == demonstration_response("look")


def test_warmup_loss_decreases_on_demonstrations():
    torch.manual_seed(0)
    model, tok = _tiny()
    demos = _demos(tok, model)
    history = run_warmup(model, demos, WarmupSettings(steps=20, batch_size=3, micro_batch_size=2, lr=3e-2),
                         tok.pad_token_id, seed=0)
    losses = [m["loss"] for m in history]
    assert all(m["phase"] == "warmup" for m in history)
    assert losses[-1] < losses[0] - 0.2 and sum(losses[-5:]) < sum(losses[:5]), losses


def test_only_response_tokens_are_in_the_loss():
    torch.manual_seed(0)
    model, tok = _tiny()
    demo = _demos(tok, model)[0]
    sample = as_sample(demo)
    loss, counted = sft_loss(model, [sample], tok.pad_token_id, float(len(demo.response_ids)))
    assert counted == len(demo.response_ids)
    # the same mean cross-entropy as transformers' own loss with every prompt position ignored (-100)
    ids = torch.tensor([demo.prompt_ids + demo.response_ids])
    labels = ids.clone()
    labels[0, : len(demo.prompt_ids)] = -100
    reference = model(input_ids=ids, labels=labels).loss
    assert float(loss) == pytest.approx(float(reference), rel=1e-4, abs=1e-5)
    # and a prompt token's gradient path: changing a prompt token changes the loss only through context,
    # while the number of counted tokens never includes it
    other = as_sample(demo)
    other.prompt_ids = [tok.pad_token_id] * 3 + other.prompt_ids
    _, counted_padded = sft_loss(model, [sample, other], tok.pad_token_id, 1.0)
    assert counted_padded == 2 * len(demo.response_ids)


def test_warm_start_runs_once_and_not_again_on_resume(tmp_path):
    trainer = Trainer(load_config(None, SETTINGS), tmp_path / "run")
    trainer.train(stop_after=1)
    trainer.close()
    run = tmp_path / "run"
    record = json.loads((run / WARMUP_FILE).read_text())
    assert set(record["eval_tasks"]).isdisjoint(record["games"])  # eval tasks are never demonstrated
    warm_lines = trainer.read_metrics("warmup")
    assert [m["warmup_step"] for m in warm_lines if "warmup_step" in m] == [1, 2, 3]
    assert {m.get("eval") for m in warm_lines} >= {"before", "after_warmup"}
    assert (run / "checkpoint-000000").is_dir()

    resumed = Trainer.from_run_dir(run)
    assert resumed.warmup_done and resumed.iteration == 1
    summary = resumed.train()
    resumed.close()
    assert resumed.read_metrics("warmup") == warm_lines  # not re-run, not lost
    assert [m["iteration"] for m in resumed.read_metrics()] == [1, 2]
    assert summary["warmup"]["steps"] == 3 and "after_warmup" in summary
    assert summary["eval_tasks"] == record["eval_tasks"]


def test_warmup_is_off_without_an_expert_and_required_when_enabled(tmp_path):
    base = [s for s in SETTINGS if not s.startswith(("env.factory", "env.kwargs"))]
    trainer = Trainer(load_config(None, base + ["env.factory=word"]), tmp_path / "a")
    assert not trainer.warmup_wanted()
    trainer.close()
    trainer = Trainer(load_config(None, base + ["env.factory=word", "warmup.enabled=true"]),
                      tmp_path / "b")
    with pytest.raises(ValueError, match="declares no expert player"):
        trainer.train()
    trainer.close()
    plain, expert = make_word_env(), make_expert_word_env()
    try:  # the cause, checked directly: only the expert env declares an expert player
        assert not has_expert(plain) and has_expert(expert)
    finally:
        plain.close()
        expert.close()
