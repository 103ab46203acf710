"""What an eval is: ``EvalSettings`` (env, tasks, samples, concurrency, output folder, the
policy and the optional judge), the names of its output files, and the outcome labels of an
episode."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubricgym.trainers.eval.judge import EvalJudge
from rubricgym.trainers.eval.policies import PolicySpec

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
Outcome = Literal["success", "failure", "truncated", "policy_error", "env_error"]
ERROR_OUTCOMES = ("policy_error", "env_error")
"""The outcomes ``--retry-errors`` plays again: the policy or the env failed, not the agent's play."""


class EvalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="gym.make keyword arguments (never a key)")
    tasks: list[str]
    samples: int = Field(1, ge=1)
    seed: int = 0
    concurrency: int = Field(1, ge=1)
    workers: int | None = Field(None, ge=1, description="worker processes (default: one per episode in flight)")
    max_steps: int | None = Field(None, ge=1)
    out: str = "runs/eval"
    resume: bool = False
    retry_errors: bool = Field(False, description="with resume: play again the episodes recorded as policy_error "
                               "or env_error (their records are dropped)")
    price_prompt_per_mtok: float = Field(0.0, ge=0)
    price_completion_per_mtok: float = Field(0.0, ge=0)
    policy: PolicySpec
    judge: EvalJudge | None = Field(None, description="--judge: DRACO verdicts, the K samples of a task one group")

    @property
    def worker_count(self) -> int:
        return min(self.workers or self.concurrency, self.concurrency)

    @property
    def episodes_per_worker(self) -> int:
        """Episodes a worker plays at once (its envs): the concurrency spread over the workers."""
        return math.ceil(self.concurrency / self.worker_count)

    @model_validator(mode="after")
    def _groups(self) -> EvalSettings:
        if self.judge is not None and self.samples < 2:
            raise ValueError("--judge scores the K samples of a task as one group: it needs --samples 2 or more")
        if self.retry_errors and not self.resume:
            raise ValueError("--retry-errors replays the errored episodes of an existing run: add --resume")
        return self
