"""The sample-efficiency study with the small choice policy (docs/study.md).

Per (estimator, seed): a ``ChoicePolicy`` is warm-started on a few expert games, then trained
with that estimator for the same trajectory budget, then evaluated greedily on the held-out
tasks. Every run of a study shares the objective (``ChoiceObjective``), the warm start, the
tasks and initial states of its seed; the estimators differ only in their advantages. The λ
sweep adds TRCA runs at the listed λ (next to ``trca_no_rb`` = 0, ``trca`` = the library's 0.8
and ``trca_no_rf`` = 1). A finished run is a file under ``runs/``; the study run again skips
it, so a stopped study resumes.

    rubricgym study --policy choice --config configs/study_choice_alfworld.yaml
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.estimators import ResolvedEstimator, resolve_estimator
from rubricgym.registration import get_spec, task_ids
from rubricgym.trainers.choice_training import ChoiceObjective, ChoiceTrainer
from rubricgym.trainers.run_files import seed_run_name, write_run_file
from rubricgym.trainers.study.pool import study_pool
from rubricgym.yaml_files import read_yaml_file

__all__ = ["ChoiceStudySettings", "RunRecord", "WarmStart", "load_choice_study", "read_records", "run_choice_study",
           "run_label", "run_one"]

DEFAULT_ESTIMATORS = ["grpo", "rloo", "gigpo", "trca", "trca_no_rf", "trca_no_rb"]


class WarmStart(BaseModel):
    """Behaviour cloning of the benchmark's expert before RL: short on purpose, so that the
    policy starts where success is rare (the papers' regime) and RL has room."""

    model_config = ConfigDict(extra="forbid")

    games: int = Field(8, ge=1, description="the first N train tasks: demonstrated, then left out of RL")
    steps: int = Field(5, ge=0, description="full-batch Adam steps on the demonstrations (0: no warm start)")
    lr: float = Field(0.05, gt=0)


class ChoiceStudySettings(BaseModel):
    """One benchmark's study: what every run shares, and which runs there are."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the study's label in files and plots (the benchmark's, say)")
    env_id: str
    eval_env_id: str | None = Field(None, description="the held-out tasks' env id (default: the spec's eval id)")
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    max_steps: int = Field(15, ge=1)
    held_out_tasks: int | None = Field(None, ge=1, description="evaluate on the first N held-out tasks")
    warm_start: WarmStart = Field(default_factory=WarmStart)
    group_size: int = Field(8, ge=2)
    tasks_per_iteration: int = Field(4, ge=1)
    trajectories: int = Field(768, ge=1, description="every run's budget of training trajectories")
    objective: ChoiceObjective = Field(default_factory=ChoiceObjective)
    estimators: list[str] = Field(default_factory=lambda: list(DEFAULT_ESTIMATORS))
    lambdas: list[float] = Field(default_factory=lambda: [0.2, 0.5], description="extra TRCA runs at these λ")
    seeds: list[int] = Field(default_factory=lambda: list(range(10)))
    target_success: float = Field(0.3, ge=0.0, le=1.0)
    window: int = Field(4, ge=1, description="iterations averaged for 'final' success, the rise and the target")
    output_dir: str = "runs/study-choice"
    jobs: int = Field(2, ge=1, description="runs at once, each in its own process (one CPU thread each)")

    @field_validator("estimators")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        for name in names:
            if resolve_estimator(name).judge_variant is not None:
                raise ValueError(f"estimator {name!r} needs an LLM judge: the choice study has none")
        return names

    @field_validator("lambdas")
    @classmethod
    def _lambdas(cls, values: list[float]) -> list[float]:
        bad = [v for v in values if not 0.0 <= v <= 1.0]
        if bad:
            raise ValueError(f"lambdas must be in [0, 1], got {bad}")
        return values

    @property
    def iterations(self) -> int:
        return max(1, -(-self.trajectories // (self.group_size * self.tasks_per_iteration)))

    def labels(self) -> list[str]:
        return [*self.estimators, *(run_label("trca", lam) for lam in self.lambdas)]


def run_label(estimator: str, lam: float | None = None) -> str:
    return estimator if lam is None else f"{estimator}_lambda{lam:g}"


def parse_label(label: str) -> tuple[str, float | None]:
    if "_lambda" in label:
        name, lam = label.rsplit("_lambda", 1)
        return name, float(lam)
    return label, None


def load_choice_study(path: str | Path, overrides: dict[str, Any] | None = None) -> ChoiceStudySettings:
    data = read_yaml_file(path) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a study config must be a mapping")
    return ChoiceStudySettings.model_validate({**data, **(overrides or {})})


class RunRecord(BaseModel):
    """One finished (label, seed): its curve (one row per iteration), held-out result, times."""

    label: str
    estimator: str
    lam: float | None
    seed: int
    estimator_settings: str
    warm_start_loss: float | None
    rows: list[dict[str, Any]]
    held_out: dict[str, Any]
    wall_s: float


def _estimator(settings: ChoiceStudySettings, label: str) -> ResolvedEstimator:
    """The label's estimator with the study's objective in it, so that the settings each run file
    records are the ones it trained with (an action is one choice: the ratio is per action)."""
    name, lam = parse_label(label)
    objective = settings.objective
    return resolve_estimator(name, lam=lam, benchmark_outcome=get_spec(settings.env_id).outcome,
                             ratio_level="action", loss_aggregation=objective.loss_aggregation,
                             skip_zero_advantage=objective.skip_zero_advantage,
                             setting_names={"lam": "the study's λ sweep", "ratio_level": "the choice policy",
                                            "loss_aggregation": "the study's objective",
                                            "skip_zero_advantage": "the study's objective"})


def _held_out(settings: ChoiceStudySettings) -> tuple[str, list[str]]:
    env_id = settings.eval_env_id
    if env_id is None:
        spec = get_spec(settings.env_id)
        env_id = next((e.eval_id for e in spec.env_ids if e.id == settings.env_id and e.eval_id), None)
    if env_id is None:
        raise ValueError(f"{settings.env_id} declares no held-out env id: set eval_env_id")
    tasks = task_ids(env_id, **settings.env_kwargs)
    return env_id, tasks[: settings.held_out_tasks] if settings.held_out_tasks else tasks


def run_one(settings: ChoiceStudySettings, label: str, seed: int, out: Path) -> RunRecord:
    """Warm-start, train and evaluate one (label, seed); kept as ``out/<label>-seed<seed>.json``
    (a finished one is read back, not trained again)."""
    path = out / f"{seed_run_name(label, seed)}.json"
    if path.is_file():
        return RunRecord.model_validate_json(path.read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    started = time.perf_counter()
    estimator = _estimator(settings, label)
    train = task_ids(settings.env_id, **settings.env_kwargs)
    warm, rest = train[: settings.warm_start.games], train[settings.warm_start.games:]
    def make(env_id: str) -> Any:
        return lambda: gym.make(env_id, max_steps=settings.max_steps, **settings.env_kwargs)

    trainer = ChoiceTrainer(make(settings.env_id), rest or train, estimator, settings.objective, settings.group_size,
                            settings.tasks_per_iteration, seed)
    eval_id, held = _held_out(settings)
    eval_env = make(eval_id)()
    try:
        loss = trainer.warm_start(warm, settings.warm_start.steps, settings.warm_start.lr) \
            if settings.warm_start.steps else None
        rows = []
        per_iteration = settings.group_size * settings.tasks_per_iteration
        for it in range(1, settings.iterations + 1):
            stats = trainer.train_iteration()
            rows.append({"iteration": it, "trajectories": it * per_iteration, **stats.__dict__})
        # the same env seed per held-out task in every run: paired across estimators and seeds
        wins = trainer.evaluate([(task, 1000 + k) for k, task in enumerate(held)], env=eval_env)
    finally:
        trainer.close()
        eval_env.close()
    name, lam = parse_label(label)
    record = RunRecord(label=label, estimator=name, lam=lam, seed=seed, estimator_settings=estimator.describe(),
                       warm_start_loss=loss, rows=rows,
                       held_out={"env_id": eval_id, "episodes": len(wins), "successes": int(sum(wins)),
                                 "success_rate": float(np.mean(wins)) if wins else 0.0},
                       wall_s=time.perf_counter() - started)
    out.mkdir(parents=True, exist_ok=True)
    write_run_file(path, record.model_dump_json(indent=1))
    return record


def read_records(settings: ChoiceStudySettings) -> list[RunRecord]:
    """The finished runs of the study's (label, seed) pairs found under its output folder."""
    runs = Path(settings.output_dir) / "runs"
    paths = [runs / f"{seed_run_name(label, seed)}.json" for seed in settings.seeds for label in settings.labels()]
    return [RunRecord.model_validate_json(p.read_text(encoding="utf-8")) for p in paths if p.is_file()]


def _run_safely(settings: ChoiceStudySettings, label: str, seed: int, out: Path) -> RunRecord | str:
    try:
        return run_one(settings, label, seed, out)
    except Exception as exc:  # noqa: BLE001 - one failed run is reported, the others go on
        return f"{type(exc).__name__}: {exc}"


def run_choice_study(settings: ChoiceStudySettings) -> tuple[list[RunRecord], dict[str, str]]:
    """Every (label, seed), seed by seed (a stopped study has whole seeds); records and failures."""
    out = Path(settings.output_dir)
    runs = out / "runs"
    out.mkdir(parents=True, exist_ok=True)
    write_run_file(out / "settings.json", json.dumps(settings.model_dump(mode="json"), indent=2))
    order = [(label, seed) for seed in settings.seeds for label in settings.labels()]
    if settings.jobs == 1:
        done = {pair: _run_safely(settings, *pair, runs) for pair in order}
    else:
        with study_pool(settings.jobs) as pool:
            futures = {pair: pool.submit(_run_safely, settings, *pair, runs) for pair in order}
            done = {}
            for pair, future in futures.items():
                try:
                    done[pair] = future.result()
                except Exception as exc:  # noqa: BLE001 - a worker process died
                    done[pair] = f"worker process failed: {type(exc).__name__}: {exc}"
    records = [r for r in done.values() if isinstance(r, RunRecord)]
    failed = {seed_run_name(label, seed): r for (label, seed), r in done.items() if isinstance(r, str)}
    return records, failed
