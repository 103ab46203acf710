"""``TRCAReward``: a gymnasium wrapper paying TRCA step rewards from an operator library."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.credit.trca import trca_rewards
from rubricgym.trca.library import Budgets
from rubricgym.trca.operators import CompiledLibrary, EpisodeJudge, as_mapping
from rubricgym.trca.validate import load_library


class TRCAConfig(BaseModel):
    """A TRCA reward spec: which library, and per-run overrides of its budgets and lambda.

    Implements the reward-spec protocol of ``rubricgym.rewards.attach_reward``
    (``wrap(env, benchmark) -> gym.Env``)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    library: str | Path | None = Field(None, description="library file; None = the benchmark's shipped one")
    r_evi: float | None = Field(None, gt=0, allow_inf_nan=False)
    r_inval: float | None = Field(None, allow_inf_nan=False)
    r_exec: float | None = Field(None, gt=0, allow_inf_nan=False)
    lam: float | None = Field(None, ge=0.0, le=1.0)
    include_env_reward: bool = Field(
        True, description="step reward = r_TRCA + env reward (the summand of the completion-aware return)"
    )

    def wrap(self, env: gym.Env, benchmark: str) -> gym.Env:
        return TRCAReward(env, self, benchmark=benchmark)


def _library_for(env: gym.Env, config: TRCAConfig, benchmark: str | None) -> CompiledLibrary:
    adapter = getattr(env.unwrapped, "adapter", None)
    facts_model = getattr(adapter, "facts_model", None)
    binding_model = getattr(adapter, "binding_model", None)
    bench = benchmark or getattr(adapter, "benchmark", None)
    source: str | os.PathLike[str]
    if config.library is not None:
        source = config.library
    else:
        if bench is None:
            raise ValueError("TRCAReward: no library given and the env does not say its benchmark")
        from rubricgym.operator_libraries import library_path

        source = library_path(bench)
    return load_library(source, facts_model, binding_model, benchmark=bench)


class TRCAReward(gym.Wrapper):
    """Step reward = r_TRCA (+ the env's own reward when ``include_env_reward``).

    ``info["trca"]`` (also stored in the transition's ``info``, so trajectories carry it):
    ``judgments`` {operator id: 0/1}, ``r_F``, ``r_B``, ``r_TRCA``, ``coverage`` {id: 0/1}
    after the step (Evidence/Execution only), ``errors`` (operators whose condition failed
    this step; they counted as 0). Coverage starts at zero on every reset."""

    def __init__(
        self,
        env: gym.Env,
        config: TRCAConfig | None = None,
        library: CompiledLibrary | None = None,
        benchmark: str | None = None,
    ):
        super().__init__(env)
        self.config = config or TRCAConfig()
        self.library = library or _library_for(env, self.config, benchmark)
        base = self.library.library
        self.budgets = Budgets(
            r_evi=self.config.r_evi if self.config.r_evi is not None else base.budgets.r_evi,
            r_inval=self.config.r_inval if self.config.r_inval is not None else base.budgets.r_inval,
            r_exec=self.config.r_exec if self.config.r_exec is not None else base.budgets.r_exec,
        )
        self.lam = self.config.lam if self.config.lam is not None else base.lam
        self._cov_ids = [i for i, ok in zip(self.library.ids, self.library.coverable, strict=True) if ok]
        self._judge: EpisodeJudge | None = None
        self._coverage = np.zeros(self.library.num_operators)

    @property
    def error_counts(self) -> dict[str, int]:
        """Condition failures per operator in the current episode (each counted as 0)."""
        return dict(self._judge.errors) if self._judge else {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        binding = info.get("binding")
        if binding is None:
            trajectory = getattr(self.env.unwrapped, "trajectory", None)
            binding = getattr(trajectory, "binding", None)
        self._judge = self.library.episode(as_mapping(binding))
        self._coverage = np.zeros(self.library.num_operators)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._judge is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        transition = info.get("transition")
        if transition is None:
            raise RuntimeError("TRCAReward needs info['transition'] from a RubricEnv underneath")
        errors_before = dict(self._judge.errors)
        row = self._judge.judge(transition.facts, self._coverage)
        b = self.budgets
        rewards = trca_rewards(row[None, :], self.library.categories, b.r_evi, b.r_inval, b.r_exec, self.lam,
                               initial_coverage=self._coverage)
        self._coverage = rewards.coverage[-1]
        r_f, r_b, r_t = float(rewards.r_f[0]), float(rewards.r_b[0]), float(rewards.r_trca[0])
        cov = dict(zip(self.library.ids, self._coverage, strict=True))
        record = {
            "judgments": {i: int(o) for i, o in zip(self.library.ids, row, strict=True)},
            "r_F": r_f,
            "r_B": r_b,
            "r_TRCA": r_t,
            "lambda": self.lam,
            "coverage": {i: int(cov[i]) for i in self._cov_ids},
            "errors": sorted(k for k, n in self._judge.errors.items() if n != errors_before.get(k, 0)),
            "library": self.library.name,
        }
        info["trca"] = record
        transition.info["trca"] = record
        reward = r_t + (float(env_reward) if self.config.include_env_reward else 0.0)
        return obs, reward, terminated, truncated, info
