"""The DRACO self-judge variant: the policy model judges its own rollouts, k times."""

from __future__ import annotations

from rubricgym.contract import load_jsonl
from rubricgym.trainers.config import load_config
from rubricgym.trainers.trainer import Trainer

SETTINGS = [
    "model.name=tiny", "env.factory=word", "env.max_steps=1",
    "algorithm.advantage=draco_static_credit", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
    "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40", "run.iterations=1", "run.progress=false",
    "run.evaluate_after=false", "judge.self_judge=true", "judge.static_rubric=appworld",
    "judge.options={max_tokens_score: 8, max_repairs: 0}",
]


def test_policy_judges_itself_with_k_repeats_and_a_versioned_id(tmp_path):
    trainer = Trainer(load_config(None, SETTINGS), tmp_path / "run")
    judge = trainer.judge
    assert judge.self_judge and judge.backend.model is trainer.model  # the policy itself, in process
    assert judge.settings.temperature > 0  # repeats must be able to differ
    trainer.train()
    trainer.close()
    assert judge.backend.model_id == f"policy:{trainer.run_dir.name}:iter1"
    score = judge.ledger.totals("score")
    # 2 rollouts x k=3 scoring repeats; a random tiny model answers nothing usable, which is
    # recorded as unanswered (never guessed), so credit falls back to plain GRPO
    assert score["calls"] == 2 * judge.settings.self_judge_repeats
    assert score["unanswered_calls"] == score["calls"]
    assert len(trainer.read_metrics()) == 1
    # each saved rollout carries the judge's record of it (what the report shows)
    saved = load_jsonl(trainer.run_dir / "trajectories" / "iter-000001.jsonl")
    assert len(saved) == 2
    for t in saved:
        record = t.meta["judge"]
        assert record["variant"] == "static/credit" and record["unanswered"] > 0
        assert set(record["criteria"]) and all(v["criterion_id"] in record["criteria"] for v in record["verdicts"])
