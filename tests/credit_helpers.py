"""Groups for credit tests: a rollout from plain arrays, its steps carrying TRCA records the way
the reward wrapper writes them (``info["rubric"]["trca"]``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rubricgym.estimators import CreditRollout


@dataclass(frozen=True)
class ArrayStep:
    env_reward: float
    context_key: str
    info: dict[str, Any] = field(default_factory=dict)
    anchor: str | None = None
    response_length: int = 1


def array_rollout(env_rewards: Sequence[float], context_keys: Sequence[str], r_f: Sequence[float] | None = None,
                  r_b: Sequence[float] | None = None, anchors: Sequence[str] | None = None,
                  success: bool | None = None, lam: float = 0.8, gamma: float | None = None,
                  tokens: Sequence[int] | None = None) -> CreditRollout:
    """One rollout; with ``r_f``/``r_b`` every step carries a TRCA record (r_TRCA mixed with
    ``lam``, the library's ``gamma`` if given)."""
    steps = []
    for t, (reward, key) in enumerate(zip(env_rewards, context_keys, strict=True)):
        info: dict[str, Any] = {}
        if r_f is not None and r_b is not None:
            record = {"r_F": float(r_f[t]), "r_B": float(r_b[t]),
                      "r_TRCA": (1 - lam) * float(r_f[t]) + lam * float(r_b[t]), "lambda": lam}
            if gamma is not None:
                record["gamma"] = gamma
            info = {"rubric": {"trca": record}}
        steps.append(ArrayStep(float(reward), key, info, anchors[t] if anchors is not None else None,
                               int(tokens[t]) if tokens is not None else 1))
    return CreditRollout(steps, success)


class ScriptedJudge:
    """A DRACO judge whose verdicts are fixed by a rule (no language model): ``verdicts(i,
    trajectory)`` gives rollout i's ``(verdict, cited steps)`` per criterion. The judge
    package's own bookkeeping (``finish_group``: dropout, R_i, A_i, p/f) and its group-to-credit
    step (``DracoJudge.group_step_credit``) turn them into a_j."""

    def __init__(self, verdicts: Any):
        self.verdicts = verdicts if callable(verdicts) else (lambda i, _trajectory: verdicts[i])

    def score_group(self, instruction: str, trajectories: Sequence[Any], variant: Any,
                    training_step: int | None = None) -> Any:
        from rubricgym.credit.draco import DracoVariant
        from rubricgym.judges.pipeline import CriterionVerdict, RolloutScore, finish_group
        from rubricgym.judges.rubric import Criterion
        from rubricgym.judges.schemas import Verdict

        per_rollout = [self.verdicts(i, t) for i, t in enumerate(trajectories)]
        criteria = [Criterion(id=f"c{k + 1}", text=f"criterion number {k + 1}") for k in range(len(per_rollout[0]))]
        rollouts = [
            RolloutScore(index=i, num_steps=t.num_steps, verdicts=[
                CriterionVerdict(criterion_id=c.id, verdict=Verdict(v), steps=steps)
                for c, (v, steps) in zip(criteria, per_rollout[i], strict=True)])
            for i, t in enumerate(trajectories)
        ]
        return finish_group(DracoVariant.parse(variant), instruction, criteria, rollouts, None)

    def group_step_credit(self, *args: Any, **kwargs: Any) -> Any:
        from rubricgym.judges.pipeline import DracoJudge

        return DracoJudge.group_step_credit(self, *args, **kwargs)  # type: ignore[arg-type]
