"""One resolution of an estimator: its name, gamma, lambda, outcome and objective, settled once.

Every caller (the trainer when its config loads, ``RubricGRPOTrainer`` when it is built, the
report and the study when they read their input) calls ``resolve_estimator`` and gets one
immutable ``ResolvedEstimator``. Each setting is chosen by one precedence rule (``choose``):
the first value that is set wins, in the order

* lambda: the estimator's own (TRCA's ablations) > the caller's setting > the reward's
  recorded lambda (the library's, or ``TRCAConfig.lam``) > the r_TRCA the reward paid;
* gamma: the caller's setting > the operator library's (recorded on every TRCA step) > 0.95;
* outcome (what A_E standardizes): the caller's setting > the benchmark's default > "return";
* ratio level, loss aggregation, zero-advantage rule: the caller's setting > the estimator's.

A value that loses to a different one is a conflict, reported the same way wherever it was
set: a ``SettingConflict`` warning naming both values and where each came from. The records'
gamma and lambda are only known when the first group arrives, so ``bind_recorded`` completes
the resolution then, through the same rule.

This is the one module that interprets what kind of estimator a name is.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from rubricgym.credit.grpo import DEFAULT_EPS
from rubricgym.credit.placement import Placement
from rubricgym.credit.trca import DEFAULT_GAMMA
from rubricgym.estimators.inputs import StepParameters
from rubricgym.estimators.registry import (Compute, Estimator, LossAggregation, Need, Objective, RatioLevel,
                                           get_estimator)

__all__ = ["Chosen", "OutcomeRule", "ResolvedEstimator", "SettingConflict", "choose", "resolve_estimator"]

OutcomeRule = Literal["return", "success"]
"""What A_E standardizes: the rollout's summed engine reward (``return``), or the papers' binary
outcome (``success``: 1 for a success, else 0, also the terminal r_env of the returns)."""


class SettingConflict(UserWarning):
    """A setting was given two different values; the message names the one used and the one ignored."""


@dataclass(frozen=True)
class Chosen:
    """A chosen value and where it came from (a setting's name, "the estimator", "the records")."""

    value: float | str | bool | None
    source: str


def choose(setting: str, candidates: Sequence[tuple[object, str]], default: Chosen) -> Chosen:
    """The first candidate that is set (not None) wins; every later set candidate with another
    value is reported as a ``SettingConflict``. ``candidates`` are ``(value, source)`` pairs in
    precedence order; ``default`` when none is set."""
    given = [(value, source) for value, source in candidates if value is not None]
    if not given:
        return default
    (value, source), rest = given[0], given[1:]
    for other, other_source in rest:
        if not _same(value, other):
            warnings.warn(f"{setting}: {source}={value!r} is used; {other_source}={other!r} is ignored",
                          SettingConflict, stacklevel=3)
    return Chosen(value, source)  # type: ignore[arg-type]


def _same(a: object, b: object) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12
    return a == b


@dataclass(frozen=True)
class ResolvedEstimator:
    """An estimator with every setting settled. ``gamma`` is None until the records are bound
    (``bind_recorded``: the library's, else 0.95); ``lam`` None means "the r_TRCA the reward
    paid". ``sources`` says where each setting came from."""

    spec: Estimator
    gamma: float | None
    lam: float | None
    eps: float
    outcome: OutcomeRule
    objective: Objective
    sources: Mapping[str, str] = field(default_factory=dict)
    bound: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def needs(self) -> frozenset[Need]:
        return self.spec.needs

    @property
    def placement(self) -> Placement:
        return self.spec.placement

    @property
    def compute(self) -> Compute:
        return self.spec.compute

    @property
    def parameters(self) -> StepParameters:
        """What the computation reads (bound: gamma settled; else the default stands in)."""
        return StepParameters(self.gamma if self.gamma is not None else DEFAULT_GAMMA, self.lam, self.eps)

    @property
    def judge_variant(self) -> str | None:
        """The DRACO pipeline to run (None: this estimator needs no judge)."""
        return self.spec.judge_variant if "judge" in self.spec.needs else None

    @property
    def episode_term(self) -> bool:
        """Whether the value is A_E + A_S with A_E the group-standardized outcome (views split it)."""
        return self.spec.episode_term

    @property
    def ratio_level(self) -> RatioLevel:
        return self.objective.ratio_level

    @property
    def loss_aggregation(self) -> LossAggregation:
        return self.objective.loss_aggregation

    @property
    def skip_zero_advantage(self) -> bool:
        return self.objective.skip_zero_advantage

    def bind_recorded(self, gamma: float | None, lam: float | None) -> ResolvedEstimator:
        """The resolution completed with what the steps' TRCA records carry (the library's gamma,
        the reward's lambda), by the same precedence rule; conflicts reported as at resolution.
        A recorded lambda that wins means "the r_TRCA the reward paid" (``lam`` stays None)."""
        chosen_gamma = choose("gamma", [(self.gamma, self.sources["gamma"]),
                                        (gamma, "the operator library's gamma (recorded)")],
                              Chosen(DEFAULT_GAMMA, "default"))
        # an ablation's own lambda is its definition, not a setting: the recorded one is no conflict there
        recorded_lam = lam if "trca" in self.needs and self.spec.lam is None else None
        chosen_lam = choose("lambda", [(self.lam, self.sources["lambda"]),
                                       (recorded_lam, "the reward's lambda (recorded)")],
                            Chosen(None, "the paid r_TRCA"))
        # self.lam wins when set; otherwise the paid r_TRCA (which the recorded lambda mixed) is used
        return replace(self, gamma=float(chosen_gamma.value), bound=True,  # type: ignore[arg-type]
                       sources={**self.sources, "gamma": chosen_gamma.source, "lambda": chosen_lam.source})

    def describe(self) -> str:
        """One line for logs and reports: the name and every setting with its source."""
        gamma = "the library's, else 0.95" if self.gamma is None else f"{self.gamma:g}"
        lam = "the paid r_TRCA" if self.lam is None else f"{self.lam:g}"
        return (f"{self.name}: gamma={gamma}, lambda={lam}, outcome={self.outcome}, ratio={self.ratio_level}, "
                f"aggregation={self.loss_aggregation}, skip_zero_advantage={self.skip_zero_advantage}")


def resolve_estimator(name: str, *, gamma: float | None = None, lam: float | None = None, eps: float = DEFAULT_EPS,
                      outcome: OutcomeRule | None = None, benchmark_outcome: OutcomeRule | None = None,
                      ratio_level: RatioLevel | None = None, loss_aggregation: LossAggregation | None = None,
                      skip_zero_advantage: bool | None = None,
                      setting_names: Mapping[str, str] | None = None) -> ResolvedEstimator:
    """Settle estimator ``name`` with the caller's settings (None = not set). ``setting_names``
    says how the caller calls each setting in messages (e.g. ``{"lam": "algorithm.trca_lambda"}``).
    An unknown name is a ``ValueError`` listing the registered ones."""
    spec = get_estimator(name)
    named = {"gamma": "gamma", "lam": "lambda", "outcome": "outcome", "ratio_level": "ratio_level",
             "loss_aggregation": "loss_aggregation", "skip_zero_advantage": "skip_zero_advantage",
             **(setting_names or {})}
    if gamma is not None and not 0.0 < gamma <= 1.0:
        raise ValueError(f"{named['gamma']} must be in (0, 1], got {gamma}")
    if lam is not None and not 0.0 <= lam <= 1.0:
        raise ValueError(f"{named['lam']} must be in [0, 1], got {lam}")
    if outcome is not None and outcome not in ("return", "success"):
        raise ValueError(f"{named['outcome']} must be 'return' or 'success', got {outcome!r}")
    chosen_lam = choose("lambda", [(spec.lam, f"estimator {spec.name!r}"), (lam, named["lam"])],
                        Chosen(None, "the paid r_TRCA"))
    chosen_outcome = choose("outcome", [(outcome, named["outcome"]), (benchmark_outcome, "the benchmark's default")],
                            Chosen("return", "default"))
    base = spec.objective
    objective = Objective(
        ratio_level=ratio_level or base.ratio_level,
        loss_aggregation=loss_aggregation or base.loss_aggregation,
        skip_zero_advantage=base.skip_zero_advantage if skip_zero_advantage is None else skip_zero_advantage)
    sources = {"lambda": chosen_lam.source, "outcome": chosen_outcome.source,
               "gamma": named["gamma"] if gamma is not None else "default",
               **{k: (named[k] if v is not None else f"estimator {spec.name!r}") for k, v in
                  (("ratio_level", ratio_level), ("loss_aggregation", loss_aggregation),
                   ("skip_zero_advantage", skip_zero_advantage))}}
    return ResolvedEstimator(spec=spec, gamma=gamma, lam=chosen_lam.value, eps=eps,  # type: ignore[arg-type]
                             outcome=chosen_outcome.value, objective=objective, sources=sources)  # type: ignore[arg-type]
