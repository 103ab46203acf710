"""The word task as a registered benchmark with a train split and a held-out eval split
(``EnvIdSpec.eval_id``), for the held-out evaluation tests."""

from __future__ import annotations

from typing import ClassVar

from trainer.word_env import WordAdapter, WordFacts

from rubricgym.adapter import TaskBinding
from rubricgym.benchmark import BenchmarkSpec, EnvIdSpec
from rubricgym.registration import register_benchmark

TRAIN_ID = "WordPickSplit-Rubric-v0"
EVAL_ID = "WordPickSplit-Rubric-Eval-v0"


class SplitWordFacts(WordFacts):
    benchmark: ClassVar[str] = "WordPickSplit"


class SplitWordAdapter(WordAdapter):
    """``split="train"``: pick-0..3; ``split="eval"``: held-0..2 (never in train)."""

    benchmark = "WordPickSplit"
    facts_model = SplitWordFacts

    def __init__(self, split: str = "train"):
        super().__init__(num_tasks=4 if split == "train" else 3)
        self.split = split

    def task_ids(self):
        prefix = "pick" if self.split == "train" else "held"
        return [f"{prefix}-{k}" for k in range(self.num_tasks)]


register_benchmark(BenchmarkSpec(
    name="WordPickSplit", facts_model=SplitWordFacts, binding_model=TaskBinding,
    binder="trainer.word_env:expert_actions", adapter=f"{__name__}:SplitWordAdapter",
    expert="trainer.word_env:expert_actions",
    env_ids=(EnvIdSpec(TRAIN_ID, {"split": "train", "reward": "none"}, eval_id=EVAL_ID),
             EnvIdSpec(EVAL_ID, {"split": "eval", "reward": "none"})),
))
