"""rubricgym's estimators in verl's advantage registry (verl 0.9.1; docs/verl.md).

Importing this module registers every rubricgym estimator that needs no judge with verl's
``register_adv_est`` as ``rubricgym_<name>`` (``rubricgym_trca``, ``rubricgym_gigpo``, ...), with
rubricgym's default settings; a verl config picks one with
``algorithm.adv_estimator=rubricgym_trca``. ``register_estimators`` registers them again with
other settings, or the DRACO ones with a judge.

What the batch must carry: per response, under the non-tensor field ``EPISODE_FIELD``
(``rubricgym_episode``), its episode as ``Episode.to_dict()`` (or that dict as JSON): every step's
env reward, context key, rubric records, anchor observation and token spans, the spans being
positions in the response (verl's ``responses`` / ``response_mask`` columns). Groups are verl's
``uid``. The outcome A_E standardizes is the benchmark's, as in rubricgym's own trainer (WebShop's
is success, not the purchase score): the agent loop writes each row's env id under
``ENV_ID_FIELD`` (``rubricgym_env_id``) and the rows are resolved per env id; a batch without
that column gets the registration's settings (``outcome=``, else the return). The registered
function computes the per-step values and places them on tokens with ``completion_advantages``
(the one credit path TRL's route and rubricgym's trainer use: per group ``group_step_values``,
then ``token_advantages``, so TRCA lands on action tokens), and returns ``(advantages,
returns)`` (both the advantages, as verl's GRPO does), shaped like ``response_mask``.

How it reaches the records: verl 0.9.1's ``compute_advantage`` hands a registered estimator only
``token_level_rewards``, ``response_mask``, ``config``, ``index`` (the ``uid`` column) and
``reward_baselines``; the non-tensor batch goes only to its built-in GDPO. The function takes a
``non_tensor_batch`` argument when given one; otherwise it reads ``rubricgym_episode`` from the
batch its caller holds (``compute_advantage``'s ``data``), found as the batch whose ``uid``
column is the very ``index`` array it was handed (an identity match, never a guess). verl's default v1 trainer rebuilds the batch from a fixed
list of fields before ``compute_advantage``, so the records are not there: the function then
stops with an error saying so (docs/verl.md, "Not done yet").

verl is imported here, so this module is imported only where verl is installed (the
``.venvs/verl`` venv, ``make verl-venv``); ``import rubricgym`` never imports it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

try:
    import torch
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est
except ImportError as exc:  # verl is missing: name the fix, not just the module
    raise ImportError(f"rubricgym.integrations.verl needs verl ({exc}): use the venv `make verl-venv` builds "
                      "(.venvs/verl, verl==0.9.1), docs/verl.md") from exc

from rubricgym.credit import DEFAULT_EPS
from rubricgym.estimators import JudgeForCredit, ResolvedEstimator, estimator_names, resolve_estimator
from rubricgym.estimators.resolve import OutcomeRule
from rubricgym.integrations.episodes import Episode, completion_advantages
from rubricgym.registration import get_spec

__all__ = ["ENV_ID_FIELD", "EPISODE_FIELD", "PREFIX", "batch_advantages", "episode_field", "register_estimators",
           "verl_name"]

EPISODE_FIELD = "rubricgym_episode"
ENV_ID_FIELD = "rubricgym_env_id"
PREFIX = "rubricgym_"
_OURS = "_rubricgym_estimator"  # attribute marking a registry entry as made here
_CALLERS = 4  # how far up the stack the batch is looked for


def verl_name(name: str) -> str:
    """The name rubricgym estimator ``name`` has in verl's registry."""
    return f"{PREFIX}{name}"


def episode_field(episode: Episode) -> str:
    """One response's ``rubricgym_episode`` value: the episode as JSON (token spans in response
    positions)."""
    return json.dumps(episode.to_dict())


def _episode(value: Any) -> Episode:
    data = json.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(data, Mapping):
        raise TypeError(f"{EPISODE_FIELD} holds {type(value).__name__}: each response's episode as "
                        "Episode.to_dict() or its JSON")
    return Episode.from_dict(data)


def batch_advantages(resolved: ResolvedEstimator, episodes: Sequence[Episode], uids: Sequence[Any],
                     response_mask: np.ndarray, *, judge: JudgeForCredit | None = None,
                     training_step: int = 0) -> np.ndarray:
    """``[rows, response length]`` advantages of a verl batch: the rows sharing a ``uid`` are one
    group (in any order in the batch), each group's values from ``completion_advantages``. A
    value placed on a token outside ``response_mask`` (an observation token, padding) is an
    error: the spans do not match the response."""
    mask = np.asarray(response_mask).astype(bool)
    if not len(episodes) == len(uids) == mask.shape[0]:
        raise ValueError(f"{len(episodes)} episodes, {len(uids)} uids and {mask.shape[0]} responses in one batch")
    groups: dict[Any, list[int]] = {}
    for row, uid in enumerate(uids):
        groups.setdefault(uid, []).append(row)
    out = np.zeros(mask.shape, dtype=np.float64)
    for uid, rows in groups.items():
        values, placed = completion_advantages(resolved, [episodes[r] for r in rows], len(rows), mask.shape[1],
                                               judge=judge, training_step=training_step)
        stray = placed & ~mask[rows]
        if stray.any():
            k, i = (int(x[0]) for x in np.nonzero(stray))
            raise ValueError(f"uid {uid!r}: a step's token span covers response position {i} of row {rows[k]}, "
                             "where response_mask is 0: the spans in rubricgym_episode must be positions of the "
                             "model's own tokens in the response")
        out[rows] = values
    return out


def _non_tensor_batch(index: Any) -> Mapping[str, Any]:
    """The ``non_tensor_batch`` whose ``uid`` column is ``index`` itself: the batch held by a
    caller up the stack (verl's ``compute_advantage`` holds it as ``data`` and hands its ``uid``
    column over as ``index``). An identity match, never a guess."""
    if index is None:
        raise ValueError("the batch has no 'uid' column: rubricgym's estimators group rollouts by verl's uid")
    frame = sys._getframe(2)  # the caller of the registered function
    for _ in range(_CALLERS):
        if frame is None:
            break
        for value in list(frame.f_locals.values()):
            fields = getattr(value, "non_tensor_batch", None)
            if isinstance(fields, Mapping) and fields.get("uid") is index:
                if EPISODE_FIELD not in fields:
                    raise ValueError(f"the batch has no '{EPISODE_FIELD}' column: each response's episode (its steps' "
                                     "records and token spans) must come with it from the rollout; verl's v1 trainer "
                                     "(trainer.use_v1=True) passes compute_advantage only a fixed list of fields "
                                     "(docs/verl.md)")
                return fields
        frame = frame.f_back
    raise ValueError(f"no batch with '{EPISODE_FIELD}' found for the uid column verl passed: call the estimator "
                     "through verl's compute_advantage, or pass non_tensor_batch=")


def _resolver(name: str, gamma: float | None, lam: float | None, eps: float,
              outcome: OutcomeRule | None) -> Callable[[str | None], ResolvedEstimator]:
    """The estimator's resolution for a row's env id: the benchmark's outcome default applies
    under the caller's settings (None: no env id known, no benchmark default)."""
    cache: dict[str | None, ResolvedEstimator] = {}

    def resolved_for(env_id: str | None) -> ResolvedEstimator:
        if env_id not in cache:
            cache[env_id] = resolve_estimator(
                name, gamma=gamma, lam=lam, eps=eps, outcome=outcome,
                benchmark_outcome=get_spec(env_id).outcome if env_id is not None else None,
                setting_names={"gamma": "register_estimators(gamma=)", "lam": "register_estimators(lam=)",
                               "outcome": "register_estimators(outcome=)"})
        return cache[env_id]

    return resolved_for


def _estimator(resolved_for: Callable[[str | None], ResolvedEstimator], judge: JudgeForCredit | None,
               training_step: int) -> Any:
    resolved = resolved_for(None)

    def estimate(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                 config: Any = None, non_tensor_batch: Mapping[str, Any] | None = None,
                 **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        fields = non_tensor_batch if non_tensor_batch is not None else _non_tensor_batch(index)
        if EPISODE_FIELD not in fields:
            raise ValueError(f"the batch has no '{EPISODE_FIELD}' column (docs/verl.md)")
        uids = index if index is not None else fields.get("uid")
        if uids is None:
            raise ValueError("the batch has no 'uid' column: rubricgym's estimators group rollouts by verl's uid")
        episodes = [_episode(v) for v in fields[EPISODE_FIELD]]
        mask = response_mask.detach().cpu().numpy()
        env_ids = fields.get(ENV_ID_FIELD)
        by_env: dict[str | None, list[int]] = {}
        for row in range(len(episodes)):
            by_env.setdefault(str(env_ids[row]) if env_ids is not None else None, []).append(row)
        values = np.zeros(mask.shape, dtype=np.float64)
        for env_id, rows in by_env.items():  # groups never span env ids: a uid is one row's rollouts
            values[rows] = batch_advantages(resolved_for(env_id), [episodes[r] for r in rows],
                                            [uids[r] for r in rows], mask[rows], judge=judge,
                                            training_step=training_step)
        advantages = torch.as_tensor(values, dtype=token_level_rewards.dtype, device=response_mask.device)
        return advantages, advantages.clone()

    estimate.__name__ = estimate.__qualname__ = verl_name(resolved.name)
    estimate.__doc__ = f"rubricgym's {resolved.describe()} (rubricgym.integrations.verl)"
    setattr(estimate, _OURS, resolved.name)
    return estimate


def register_estimators(names: Iterable[str] | None = None, *, gamma: float | None = None, lam: float | None = None,
                        eps: float = DEFAULT_EPS, outcome: OutcomeRule | None = None,
                        judge: JudgeForCredit | None = None, training_step: int = 0) -> list[str]:
    """Register rubricgym estimators ``names`` (default: every registered one that needs no judge,
    and the DRACO ones too when ``judge`` is given) with verl's ``register_adv_est`` as
    ``rubricgym_<name>``, replacing this module's earlier registration of the same name; returns
    the verl names. ``gamma``/``lam``/``eps``/``outcome`` are rubricgym's (``resolve_estimator``),
    not verl's ``algorithm.gamma``/``algorithm.lam`` (GAE's); unset, ``outcome`` is each row's
    benchmark's default (its ``rubricgym_env_id``). A DRACO estimator without a ``judge`` is an
    error: its values come from the judge's verdicts, which are not in the batch."""
    chosen = list(names) if names is not None else [
        n for n in estimator_names() if judge is not None or resolve_estimator(n).judge_variant is None]
    registered = []
    for name in chosen:
        resolved_for = _resolver(name, gamma, lam, eps, outcome)
        resolved = resolved_for(None)
        if resolved.judge_variant is not None and judge is None:
            raise ValueError(f"estimator {name!r} needs a DRACO judge (its values come from the judge's verdicts on "
                             "the trajectories, not from the batch): register_estimators([...], judge=DracoJudge(...))")
        key = verl_name(name)
        if key in ADV_ESTIMATOR_REGISTRY:
            if getattr(ADV_ESTIMATOR_REGISTRY[key], _OURS, None) is None:
                raise ValueError(f"verl already has an advantage estimator {key!r} that rubricgym did not register")
            del ADV_ESTIMATOR_REGISTRY[key]
        register_adv_est(key)(_estimator(resolved_for, judge, training_step))
        registered.append(key)
    return registered


register_estimators()
