"""rubricgym inside TRL (``pip install 'rubricgym[trl]'``): multi-turn rubricgym episodes as
TRL completions, rubricgym's per-step advantages in TRL's ``GRPOTrainer``, and rubricgym envs as
tools for TRL's ``environment_factory`` (``rubricgym_environment``).

>>> trainer = RubricGRPOTrainer(model=model, args=GRPOConfig(...), processing_class=tokenizer,
...                             train_dataset=rubricgym_dataset("ALFWorld-Rubric-v0", seeds=range(8)),
...                             rollout_func=rubricgym_rollout_func("ALFWorld-Rubric-v0", max_steps=6),
...                             estimator="trca")

docs/integrations.md says how TRL's loss then differs from rubricgym's trainer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

try:
    import trl
    from accelerate.utils import gather_object
    from trl import GRPOTrainer
except ImportError as exc:  # the extra is missing: name the fix, not just the module
    raise ImportError(f"rubricgym.integrations.trl needs TRL ({exc}): pip install 'rubricgym[trl]' "
                      "(trl==1.16.0)") from exc

import torch

from rubricgym.estimators import OutcomeRule, ResolvedEstimator, resolve_estimator
from rubricgym.integrations.episodes import Episode, Processes, completion_advantages
from rubricgym.integrations.trl_rollout import EPISODE_FIELD, MissingSeed, RubricRollout
from rubricgym.integrations.trl_tools import rubricgym_environment
from rubricgym.prompts import PromptSettings
from rubricgym.registration import check_env_id, get_spec, task_ids

__all__ = ["MissingSeed", "RubricGRPOTrainer", "RubricRollout", "episode_return", "rubricgym_dataset",
           "rubricgym_environment", "rubricgym_rollout_func"]

TRL_VERSION = trl.__version__


def rubricgym_rollout_func(env_id: str, *, prompt: PromptSettings | None = None, max_new_tokens: int = 256,
                           **make_kwargs: Any) -> RubricRollout:
    """A TRL ``rollout_func`` playing one ``env_id`` episode per prompt row (``gym.make`` gets
    ``make_kwargs``, e.g. ``max_steps``); ``max_new_tokens`` caps one turn, TRL's
    ``max_completion_length`` the whole episode. An unknown ``env_id`` fails here."""
    return RubricRollout(env_id, prompt=prompt, max_new_tokens=max_new_tokens, **make_kwargs)


def rubricgym_dataset(env_id: str, seeds: Iterable[int], tasks: Sequence[str] | None = None) -> Any:
    """A ``datasets.Dataset`` of prompt rows: one per seed, with the task of that seed (the
    env id's train tasks in turn, or ``tasks``). The ``prompt`` column only labels the row in
    TRL's logs; the episode's real prompt is built from the env."""
    from datasets import Dataset  # optional: the trl extra (TRL brings datasets)

    tasks = list(tasks) if tasks is not None else task_ids(check_env_id(env_id))
    rows = [{"prompt": f"{env_id} task {tasks[i % len(tasks)]} seed {seed}", "seed": int(seed),
             "task_id": tasks[i % len(tasks)]} for i, seed in enumerate(seeds)]
    return Dataset.from_list(rows)


def episode_return(completions: list[Any], rubricgym_episode: list[dict[str, Any]], **_: Any) -> list[float]:
    """TRL reward function: the episode's env return (the engine's outcome). TRL's own
    completion-level advantage from it is what ``RubricGRPOTrainer`` replaces."""
    return [float(e["env_return"]) for e in rubricgym_episode]


class RubricGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` whose advantages are rubricgym's: a ``(B, T)`` tensor from any
    registered estimator (``rubricgym.estimators``; the DRACO ones given
    ``judge=DracoJudge(...)``; None keeps TRL's own one advantage per completion), resolved once
    here (``gamma``, ``lam``, ``outcome``, ``eps``: the settings the own trainer's ``algorithm``
    section has), computed by the same code as rubricgym's trainer and placed on tokens by
    ``rubricgym.credit.token_advantages`` exactly as it places them. Everything else (sampling,
    the clipped token-level loss, KL, logging) stays TRL's. It also hands the prompt rows to a
    ``rubricgym_rollout_func``; ``reward_funcs`` defaults to ``episode_return``. After each
    generation ``last_episodes``, ``last_advantages`` and ``last_env_mask`` hold what was
    trained on (this process's rows). Under ``accelerate launch`` each group's credit is
    computed on the whole group, also where TRL splits it across two processes
    (docs/integrations.md, "Across processes"); with ``use_vllm=True`` the rollout generates
    each turn through TRL's vLLM engine and hands TRL the sampler's log-probs (never run with vLLM
    here: no GPU)."""

    def __init__(self, *args: Any, estimator: str | None = "trca", gamma: float | None = None,
                 lam: float | None = None, outcome: OutcomeRule | None = None, eps: float = 1e-6,
                 judge: Any = None, **kwargs: Any):
        rollout = kwargs.get("rollout_func")
        env_id = getattr(rollout, "env_id", None)
        self.estimator: ResolvedEstimator | None = None if estimator is None else resolve_estimator(
            estimator, gamma=gamma, lam=lam, eps=eps, outcome=outcome,
            benchmark_outcome=get_spec(env_id).outcome if env_id else None,
            setting_names={"gamma": "RubricGRPOTrainer(gamma=)", "lam": "RubricGRPOTrainer(lam=)",
                           "outcome": "RubricGRPOTrainer(outcome=)"})
        if self.estimator is not None and self.estimator.judge_variant is not None and judge is None:
            raise ValueError(f"estimator {estimator!r} needs a DRACO judge: pass judge=DracoJudge(...) "
                             "(rubricgym.judges, an OpenAI-compatible endpoint), or use another estimator")
        self.judge = judge
        kwargs.setdefault("reward_funcs", [episode_return])
        self.rubricgym_rows: list[dict[str, Any]] | None = None
        self.last_episodes: list[Episode] = []
        self.last_advantages: torch.Tensor | None = None
        self.last_env_mask: torch.Tensor | None = None
        self.credit_seconds = 0.0  # time spent reading episodes and computing/placing advantages
        super().__init__(*args, **kwargs)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.rubricgym_rows = [dict(row) for row in inputs]
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self.rubricgym_rows = None
        if any(EPISODE_FIELD not in row for row in inputs):
            raise TypeError("RubricGRPOTrainer needs rollout_func=rubricgym_rollout_func(env_id): its rows carry "
                            "no rubricgym episodes")
        started = time.perf_counter()
        self.last_episodes = [Episode.from_dict(row[EPISODE_FIELD]) for row in inputs]
        if self.estimator is None:  # TRL's own completion-level advantage
            self.last_advantages, self.last_env_mask = out["advantages"], out.get("tool_mask")
            return out
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else (self.num_generations_eval or self.num_generations)
        length = out["completion_ids"].size(1)
        # under accelerate launch TRL gives process p the batch's rows p*n..(p+1)*n-1, and a group
        # may straddle two processes: each group is then computed once on the whole group
        processes = Processes(self.accelerator.process_index, self.accelerator.num_processes, gather_object)
        values, _ = completion_advantages(self.estimator, self.last_episodes, group, length, judge=self.judge,
                                          training_step=int(self.state.global_step), processes=processes)
        advantages = torch.as_tensor(values, dtype=torch.float32, device=out["completion_ids"].device)
        out["advantages"] = advantages
        self.last_advantages, self.last_env_mask = advantages, out.get("tool_mask")
        self.credit_seconds += time.perf_counter() - started
        return out
