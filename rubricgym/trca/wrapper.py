"""TRCA as a reward component: an operator library's judgments turned into step rewards.

``TRCAConfig`` is the reward spec (``gym.make(id, reward=TRCAConfig(lam=0.5))``);
``TRCAComponent`` scores each step with the formulas of ``rubricgym.credit.trca``;
``TRCAReward`` is the one-component ``RubricReward`` for direct use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Transition
from rubricgym.credit.trca import trca_rewards
from rubricgym.estimators import Chosen, choose
from rubricgym.rewards import ComponentScore, RewardContext, RubricReward
from rubricgym.trca.library import Budgets
from rubricgym.trca.operators import CompiledLibrary, EpisodeJudge, as_mapping
from rubricgym.trca.validate import load_library

__all__ = ["TRCAComponent", "TRCAConfig", "TRCAReward", "library_for"]


class TRCAConfig(BaseModel):
    """A TRCA reward spec: which library, and per-run overrides of its budgets and lambda."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field("trca", description="the component's key in info['rubric']")
    library: str | Path | None = Field(None, description="library file; None = the benchmark's shipped one")
    r_evi: float | None = Field(None, gt=0, allow_inf_nan=False)
    r_inval: float | None = Field(None, allow_inf_nan=False)
    r_exec: float | None = Field(None, gt=0, allow_inf_nan=False)
    lam: float | None = Field(None, ge=0.0, le=1.0)
    keep_env_reward: bool = Field(
        True, description="step reward = r_TRCA + env reward (the summand of the completion-aware return)"
    )

    def component(self, env: gym.Env[str, str], context: RewardContext) -> TRCAComponent:
        return TRCAComponent(library_for(self, context), self)


def library_for(config: TRCAConfig, context: RewardContext) -> CompiledLibrary:
    """The library the config names, else the benchmark's shipped one (its spec's), checked
    against the benchmark's models (without a benchmark: the models the library names)."""
    source = config.library if config.library is not None else context.operator_library
    if source is None:
        raise LookupError(f"no operator library ships for {context.benchmark}; pass reward='none' or a library path "
                          "(see docs/authoring.md)")
    return load_library(source, context.facts_model, context.binding_model, benchmark=context.benchmark or None)


class TRCAComponent:
    """Scores one step: judgments of every operator, r_F, r_B, r_TRCA and coverage.

    Record parts: ``judgments`` {operator id: 0/1}, ``r_F``, ``r_B``, ``r_TRCA`` (= reward),
    ``lambda``, ``gamma`` (the library's discount, the return's default), ``coverage`` {id: 0/1} after the step (Evidence/Execution only), ``errors``
    (operators whose condition failed this step; they counted as 0), ``library``. Coverage
    starts at zero on every reset. ``incidents``: operators first reported this step (a
    condition error, or evaluation over its CPU budget); ``disabled``: operators over budget,
    scored 0 for the rest of the episode."""

    def __init__(self, library: CompiledLibrary, config: TRCAConfig | None = None):
        self.config = config or TRCAConfig()
        self.name = self.config.name
        self.keep_env_reward = self.config.keep_env_reward
        self.library = library
        base = library.library
        c = self.config
        self.budgets = Budgets(
            r_evi=c.r_evi if c.r_evi is not None else base.budgets.r_evi,
            r_inval=c.r_inval if c.r_inval is not None else base.budgets.r_inval,
            r_exec=c.r_exec if c.r_exec is not None else base.budgets.r_exec,
        )
        # one precedence rule for lambda everywhere: the spec's over the library's, a difference reported
        self.lam = float(choose("lambda", [(c.lam, "TRCAConfig.lam"), (base.lam, f"library {base.name!r} lambda")],
                                Chosen(base.lam, "the library's lambda")).value)  # type: ignore[arg-type]
        self._cov_ids = [i for i, ok in zip(library.ids, library.coverable, strict=True) if ok]
        self._judge: EpisodeJudge | None = None
        self._coverage = np.zeros(library.num_operators)

    @property
    def error_counts(self) -> dict[str, int]:
        """Condition failures per operator in the current episode (each counted as 0)."""
        return dict(self._judge.errors) if self._judge else {}

    def reset(self, info: Mapping[str, Any]) -> None:
        self._judge = self.library.episode(as_mapping(info.get("binding")))
        self._coverage = np.zeros(self.library.num_operators)

    def score(self, transition: Transition, info: Mapping[str, Any]) -> ComponentScore:
        if self._judge is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        errors_before = dict(self._judge.errors)
        incidents_before = len(self._judge.incidents)
        row = self._judge.judge(transition.facts, self._coverage)
        b = self.budgets
        rewards = trca_rewards(row[None, :], self.library.categories, b.r_evi, b.r_inval, b.r_exec, self.lam,
                               initial_coverage=self._coverage)
        self._coverage = rewards.coverage[-1]
        cov = dict(zip(self.library.ids, self._coverage, strict=True))
        r_t = float(rewards.r_trca[0])
        return ComponentScore(r_t, {
            "judgments": {i: int(o) for i, o in zip(self.library.ids, row, strict=True)},
            "r_F": float(rewards.r_f[0]),
            "r_B": float(rewards.r_b[0]),
            "r_TRCA": r_t,
            "lambda": self.lam,
            "gamma": self.library.library.gamma,
            "coverage": {i: int(cov[i]) for i in self._cov_ids},
            "errors": sorted(k for k, n in self._judge.errors.items() if n != errors_before.get(k, 0)),
            "incidents": [i.model_dump(mode="json") for i in self._judge.incidents[incidents_before:]],
            "disabled": sorted(self._judge.disabled),
            "library": self.library.name,
        })


class TRCAReward(RubricReward):
    """A ``RubricReward`` with one TRCA component (``info["rubric"]["trca"]``, alias
    ``info["trca"]``). Step reward = r_TRCA (+ the env's own reward when kept). The library
    is ``library``, else the one ``config`` names or ``context`` ships."""

    def __init__(self, env: gym.Env[str, str], config: TRCAConfig | None = None,
                 library: CompiledLibrary | None = None, context: RewardContext | None = None):
        config = config or TRCAConfig()
        if library is None:
            if context is None and config.library is None:
                raise ValueError("TRCAReward needs a library: pass library=, TRCAConfig(library=PATH) or context=")
            library = library_for(config, context or RewardContext(benchmark=""))
        component = TRCAComponent(library, config)
        super().__init__(env, [(component, 1.0)])
        self.trca = component

    @property
    def library(self) -> CompiledLibrary:
        return self.trca.library

    @property
    def error_counts(self) -> dict[str, int]:
        return self.trca.error_counts
