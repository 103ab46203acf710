"""The DRACO rubric pipeline for one group of rollouts (docs/design.md §5, steps 1-7).

propose (instruction only) -> extend (one call per rollout) -> merge (one shared set) ->
score (one call per rollout; k calls for the self-judge) -> discriminative dropout ->
R_i -> A_i. Step credit (step 8) is ``GroupResult.step_advantages``, which calls the pure
functions in ``rubricgym.credit.draco``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from rubricgym.contract import Trajectory
from rubricgym.credit import draco
from rubricgym.credit.draco import DracoVariant
from rubricgym.judges import prompts
from rubricgym.judges.cache import ResponseCache
from rubricgym.judges.client import ChatBackend, ChatRequest, OpenAIChatBackend
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.ledger import Ledger
from rubricgym.judges.rubric import Criterion, Rubric
from rubricgym.judges.schemas import Verdict, criteria_answer_model, inline_json_schema, score_answer_model
from rubricgym.judges.structured import StructuredCaller

log = logging.getLogger(__name__)

_CODES = {
    Verdict.PASS: draco.VERDICT_PASS,
    Verdict.FAIL: draco.VERDICT_FAIL,
    Verdict.NOT_APPLICABLE: draco.VERDICT_NOT_APPLICABLE,
    Verdict.UNANSWERED: draco.VERDICT_UNANSWERED,
}
CRITERIA_EXAMPLE = '{"criteria": [{"text": "The agent ..."}]}'


class CriterionVerdict(BaseModel):
    criterion_id: str
    verdict: Verdict
    steps: list[int] = Field(default_factory=list, description="cited step indices that exist in the rollout")
    reason: str = ""


class RolloutScore(BaseModel):
    index: int
    task_id: str = ""
    seed: int | None = None
    num_steps: int
    verdicts: list[CriterionVerdict]
    reward: float = 0.0
    advantage: float = 0.0
    step_passes: list[int] = Field(default_factory=list, description="p_j: passed surviving criteria citing step j")
    step_fails: list[int] = Field(default_factory=list, description="f_j: failed surviving criteria citing step j")
    unanswered: int = 0
    dropped_citations: int = Field(0, description="cited step numbers that do not exist in the rollout")
    judge_errors: list[str] = Field(default_factory=list)

    def verdict_codes(self) -> np.ndarray:
        return np.array([_CODES[v.verdict] for v in self.verdicts], dtype=np.int64)

    def citation_matrix(self) -> np.ndarray:
        m = np.zeros((len(self.verdicts), self.num_steps), dtype=bool)
        for c, v in enumerate(self.verdicts):
            m[c, v.steps] = True
        return m


class GroupResult(BaseModel):
    """Everything the trainer needs from one group: R_i, A_i, surviving criteria, p/f."""

    variant: DracoVariant
    task_instruction: str
    criteria: list[Criterion]
    surviving: list[bool]
    rollouts: list[RolloutScore]
    criteria_note: str | None = Field(None, description="why the criteria set fell back, if it did")

    @property
    def rewards(self) -> np.ndarray:
        return np.array([r.reward for r in self.rollouts], dtype=float)

    @property
    def advantages(self) -> np.ndarray:
        return np.array([r.advantage for r in self.rollouts], dtype=float)

    @property
    def surviving_criteria(self) -> list[Criterion]:
        return [c for c, keep in zip(self.criteria, self.surviving) if keep]

    def verdict_matrix(self) -> np.ndarray:
        return np.stack([r.verdict_codes() for r in self.rollouts]) if self.rollouts else np.zeros((0, 0), int)

    def rollout_record(self, index: int) -> dict[str, Any]:
        """Rollout ``index``'s verdicts as JSON, in the layout of the judge component's record
        (``verdicts``, ``criteria``, ``reward``, ``step_passes`` / ``step_fails``, ...) plus the
        group's view: the variant, A_i and which criteria survived dropout."""
        r = self.rollouts[index]
        return {"variant": self.variant.value, "reward": r.reward, "advantage": r.advantage,
                "criteria": {c.id: c.text for c in self.criteria},
                "surviving": [c.id for c in self.surviving_criteria],
                "verdicts": [v.model_dump(mode="json") for v in r.verdicts],
                "step_passes": list(r.step_passes), "step_fails": list(r.step_fails), "unanswered": r.unanswered,
                "dropped_citations": r.dropped_citations, "errors": list(r.judge_errors),
                "criteria_note": self.criteria_note}

    def step_advantages(self, index: int, step_tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """a_j for rollout ``index`` given its per-step token counts n_j (the variant decides
        between cited-verdict credit and plain GRPO)."""
        r = self.rollouts[index]
        if len(step_tokens) != r.num_steps:
            raise ValueError(f"rollout {index} has {r.num_steps} steps, got {len(step_tokens)} token counts")
        return draco.draco_step_advantages(self.variant, r.advantage, step_tokens, r.step_passes, r.step_fails)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def dedupe_texts(texts: Sequence[str]) -> list[str]:
    """Exact de-duplication after case/punctuation normalisation (order kept)."""
    seen: set[str] = set()
    out: list[str] = []
    for text in texts:
        key = _norm(text)
        if key and key not in seen:
            seen.add(key)
            out.append(" ".join(text.split()))
    return out


def aggregate_repeats(repeats: Sequence[CriterionVerdict]) -> CriterionVerdict:
    """Self-judge as DRACO publishes it: a criterion passes only if all k calls pass it, and is
    not applicable only if all k say so; any other mix is not a pass: a fail, unless a call
    that gave no answer leaves it open (the answered calls all pass, or all say not
    applicable: then unanswered, never guessed). Citations are the union over the calls that
    gave the outcome; a fail made up from a pass / not-applicable mix cites no step (an
    uncited fail, the paper's fallback).
    """
    verdicts = [r.verdict for r in repeats]
    answered = {v for v in verdicts if v is not Verdict.UNANSWERED}
    if Verdict.FAIL in answered or answered >= {Verdict.PASS, Verdict.NOT_APPLICABLE}:
        final = Verdict.FAIL  # whatever the unanswered calls said, not all k pass nor all k are n/a
    elif Verdict.UNANSWERED in verdicts or not answered:
        final = Verdict.UNANSWERED
    else:
        final = answered.pop()  # all k pass, or all k not applicable
    steps = sorted({s for r in repeats if r.verdict is final for s in r.steps})
    reason = next((r.reason for r in repeats if r.verdict is final and r.reason), "")
    return CriterionVerdict(criterion_id=repeats[0].criterion_id, verdict=final, steps=steps, reason=reason)


class DracoJudge:
    """Rubric judge over any ``ChatBackend``. Thread-safe; calls run ``concurrency`` at a time.

    ``self_judge``: scoring is repeated ``settings.self_judge_repeats`` times (k) and a
    criterion passes only if all k pass (``aggregate_repeats``; use a temperature > 0 so
    repeats differ). The appendix variant: ``self_judge_repeats=1, thinking=False``.
    """

    def __init__(
        self,
        backend: ChatBackend,
        settings: JudgeSettings | None = None,
        static_rubric: Rubric | None = None,
        cache: ResponseCache | None = None,
        ledger: Ledger | None = None,
        self_judge: bool = False,
    ):
        self.settings = settings or JudgeSettings()
        self.backend = backend
        self.static_rubric = static_rubric
        self.ledger = ledger or Ledger(self.settings.price_prompt_per_mtok, self.settings.price_completion_per_mtok)
        if cache is None and self.settings.cache_dir:
            cache = ResponseCache(self.settings.cache_dir)
        self.cache = cache
        self.self_judge = self_judge
        limit = backend.max_concurrency or self.settings.concurrency
        self.workers = max(1, min(self.settings.concurrency, limit))
        self.caller = StructuredCaller(backend, self.ledger, cache, self.settings.max_repairs, self.workers)

    @classmethod
    def from_settings(cls, settings: JudgeSettings | None = None, **kwargs: Any) -> DracoJudge:
        """An OpenAI-compatible judge from settings (arguments or RUBRICGYM_JUDGE_* env)."""
        settings = settings or JudgeSettings()
        return cls(OpenAIChatBackend(settings), settings=settings, **kwargs)

    # ---- request building ----------------------------------------------------------------
    def _format(self, example: str, schema: dict[str, Any]) -> str:
        return prompts.format_block(example, None if self.backend.enforces_schema else schema)

    def _request(self, phase: str, values: dict[str, Any], model: type[BaseModel], example: str, **extra: Any) -> ChatRequest:
        schema = inline_json_schema(model)
        values = {**values, "format_block": self._format(example, schema)}
        s = self.settings
        thinks = s.thinking if s.thinking is not None else bool(getattr(self.backend, "thinks_by_default", False))
        params: dict[str, Any] = {
            "max_tokens": s.max_tokens(phase, thinking=thinks),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "thinking": s.thinking,
            **extra,
        }
        return ChatRequest(
            phase=phase,
            messages=prompts.build_messages(phase, values),
            schema_name=f"draco_{phase}",
            json_schema=schema,
            **params,
        )

    def _instruction(self, instruction: str) -> str:
        return prompts.instruction_block(instruction)

    def _trajectory(self, traj: Trajectory) -> str:
        """The rollout's own steps (its start is in ``_initial``, part of the shared prefix)."""
        return prompts.trajectory_block(traj, self.settings.max_response_chars, self.settings.max_observation_chars,
                                        with_initial=False)

    def _initial(self, traj: Trajectory) -> str:
        return prompts.initial_observation_block(traj, self.settings.max_observation_chars)

    def _map(self, fn: Any, items: Sequence[Any]) -> list[Any]:
        if self.workers == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="judge") as pool:
            return list(pool.map(fn, items))

    # ---- phases --------------------------------------------------------------------------
    def propose_request(self, instruction: str) -> ChatRequest:
        n = self.settings.new_criteria_cap("propose")
        return self._request(
            "propose",
            {"max_items": n, "instruction_block": self._instruction(instruction)},
            criteria_answer_model(n),
            CRITERIA_EXAMPLE,
        )

    def propose(self, instruction: str, step: int | None = None) -> list[str] | None:
        n = self.settings.new_criteria_cap("propose")
        res = self.caller.call(self.propose_request(instruction), criteria_answer_model(n), step)
        return None if res.value is None else [c.text for c in res.value.criteria]

    def extend_request(self, instruction: str, current: Sequence[str], traj: Trajectory) -> ChatRequest:
        n = self.settings.new_criteria_cap("extend")
        return self._request(
            "extend",
            {
                "max_items": n,
                "instruction_block": self._instruction(instruction),
                "criteria_block": prompts.criteria_block([(f"p{i + 1}", t) for i, t in enumerate(current)]),
                "initial_block": self._initial(traj),
                "trajectory_block": self._trajectory(traj),
            },
            criteria_answer_model(n),
            CRITERIA_EXAMPLE,
        )

    def extend(self, instruction: str, current: Sequence[str], traj: Trajectory, step: int | None = None) -> list[str] | None:
        n = self.settings.new_criteria_cap("extend")
        res = self.caller.call(self.extend_request(instruction, current, traj), criteria_answer_model(n), step)
        return None if res.value is None else [c.text for c in res.value.criteria]

    def merge_request(self, instruction: str, candidates: Sequence[str]) -> ChatRequest:
        n = self.settings.max_criteria
        return self._request(
            "merge",
            {
                "max_items": n,
                "instruction_block": self._instruction(instruction),
                "criteria_block": prompts.criteria_block([(f"k{i + 1}", t) for i, t in enumerate(candidates)]),
            },
            criteria_answer_model(n),
            CRITERIA_EXAMPLE,
        )

    def merge(self, instruction: str, candidates: Sequence[str], step: int | None = None) -> list[str] | None:
        n = self.settings.max_criteria
        res = self.caller.call(self.merge_request(instruction, candidates), criteria_answer_model(n), step)
        return None if res.value is None else [c.text for c in res.value.criteria]

    def _score_model(self, criteria: Sequence[Criterion]) -> type[BaseModel]:
        return score_answer_model([c.id for c in criteria], self.settings.max_citations, self.settings.ask_reasons)

    def score_request(self, instruction: str, criteria: Sequence[Criterion], traj: Trajectory, sample: int = 0) -> ChatRequest:
        s = self.settings
        example_item = ('{"reason": "...", "verdict": "pass", "steps": [0, 3]}' if s.ask_reasons
                        else '{"verdict": "pass", "steps": [0, 3]}')
        example = f'{{"{criteria[0].id}": {example_item}, ...one entry for every criterion id, in order}}'
        extra: dict[str, Any] = {"sample": sample}
        if sample and s.seed is not None:
            extra["seed"] = s.seed + sample
        return self._request(
            "score",
            {
                "instruction_block": self._instruction(instruction),
                "criteria_block": prompts.criteria_block([(c.id, c.text) for c in criteria]),
                "initial_block": self._initial(traj),
                "last_step": max(0, traj.num_steps - 1),
                "trajectory_block": self._trajectory(traj),
            },
            self._score_model(criteria),
            example,
            **extra,
        )

    def score_once(
        self, instruction: str, criteria: Sequence[Criterion], traj: Trajectory, step: int | None = None, sample: int = 0
    ) -> tuple[list[CriterionVerdict], int, str | None]:
        """(verdicts in criteria order, dropped citations, error). A failed call -> all
        UNANSWERED; citations of steps that do not exist are dropped and counted."""
        request = self.score_request(instruction, criteria, traj, sample)
        res = self.caller.call(request, self._score_model(criteria), step)
        if res.value is None:
            unanswered = [CriterionVerdict(criterion_id=c.id, verdict=Verdict.UNANSWERED) for c in criteria]
            self.ledger.add("score", step, unanswered_verdicts=len(criteria))
            return unanswered, 0, res.error
        answer = res.value.model_dump(by_alias=True)
        m = traj.num_steps
        out: list[CriterionVerdict] = []
        dropped = 0
        for c in criteria:
            item = answer[c.id]
            cited = [int(s) for s in item.get("steps", [])]
            valid = sorted({s for s in cited if 0 <= s < m})
            dropped += len([s for s in cited if not 0 <= s < m])
            out.append(
                CriterionVerdict(
                    criterion_id=c.id, verdict=Verdict(item["verdict"]), steps=valid, reason=item.get("reason", "")
                )
            )
        if dropped:
            self.ledger.add("score", step, dropped_citations=dropped)
        return out, dropped, None

    def score_rollout(
        self, instruction: str, criteria: Sequence[Criterion], traj: Trajectory, index: int = 0, step: int | None = None
    ) -> RolloutScore:
        """Verdicts of one rollout (k repeats aggregated for the self-judge); no reward yet."""
        if not criteria:
            return RolloutScore(index=index, task_id=traj.task_id, seed=traj.seed, num_steps=traj.num_steps, verdicts=[])
        k = self.settings.self_judge_repeats if self.self_judge else 1
        runs = [self.score_once(instruction, criteria, traj, step, sample) for sample in range(k)]
        return self._rollout_from_runs(index, traj, runs)

    def _rollout_from_runs(self, index: int, traj: Trajectory, runs: list[tuple[list[CriterionVerdict], int, str | None]]) -> RolloutScore:
        if len(runs) == 1:
            verdicts = runs[0][0]
        else:
            verdicts = [aggregate_repeats([r[0][c] for r in runs]) for c in range(len(runs[0][0]))]
        return RolloutScore(
            index=index,
            task_id=traj.task_id,
            seed=traj.seed,
            num_steps=traj.num_steps,
            verdicts=verdicts,
            unanswered=sum(v.verdict is Verdict.UNANSWERED for v in verdicts),
            dropped_citations=sum(r[1] for r in runs),
            judge_errors=[r[2] for r in runs if r[2]],
        )

    # ---- criteria for a group ------------------------------------------------------------
    def build_criteria(
        self, instruction: str, trajectories: Sequence[Trajectory], variant: DracoVariant, step: int | None = None
    ) -> tuple[list[Criterion], str | None]:
        """Static: the rubric file. Dynamic: propose -> extend (per rollout) -> merge."""
        if not variant.dynamic:
            if self.static_rubric is None:
                raise ValueError(f"variant {variant.value} needs a static rubric (DracoJudge(static_rubric=...))")
            return list(self.static_rubric.criteria), None
        proposed = self.propose(instruction, step) or []
        seeds = [c.text for c in self.static_rubric.criteria] if (
            self.settings.include_static_in_dynamic and self.static_rubric is not None) else []
        current = dedupe_texts(seeds + proposed)
        extended = self._map(lambda t: self.extend(instruction, current, t, step), list(trajectories))
        candidates = dedupe_texts(current + [text for ext in extended if ext for text in ext])
        note = None
        if not candidates:
            if self.static_rubric is not None:
                return list(self.static_rubric.criteria), "no criteria proposed or extended: static rubric used"
            return [], "no criteria proposed or extended: every rollout gets R = 0"
        merged = self.merge(instruction, candidates, step) if len(candidates) > 1 else candidates
        if not merged:
            note = "merge gave no usable answer: de-duplicated candidates used"
            merged = candidates
            source = "extended"
        else:
            source = "merged"
        texts = dedupe_texts(merged)[: self.settings.max_criteria]
        return [Criterion(id=f"c{i + 1}", text=t, source=source) for i, t in enumerate(texts)], note

    # ---- the group API -------------------------------------------------------------------
    def score_group(
        self,
        task_instruction: str,
        trajectories: Sequence[Trajectory],
        variant: DracoVariant | str = DracoVariant.DYNAMIC_CREDIT,
        training_step: int | None = None,
    ) -> GroupResult:
        """Steps 1-7 for one group of rollouts of the same task."""
        variant = DracoVariant.parse(variant)
        trajs = list(trajectories)
        criteria, note = self.build_criteria(task_instruction, trajs, variant, training_step)
        k = self.settings.self_judge_repeats if (self.self_judge and criteria) else 1
        jobs = [(i, s) for i in range(len(trajs)) for s in range(k)] if criteria else []
        runs = self._map(lambda job: self.score_once(task_instruction, criteria, trajs[job[0]], training_step, job[1]), jobs)
        rollouts: list[RolloutScore] = []
        for i, traj in enumerate(trajs):
            mine = runs[i * k : (i + 1) * k]
            if mine:
                rollouts.append(self._rollout_from_runs(i, traj, mine))
            else:
                rollouts.append(RolloutScore(index=i, task_id=traj.task_id, seed=traj.seed, num_steps=traj.num_steps, verdicts=[]))
        return finish_group(variant, task_instruction, criteria, rollouts, note)

    def group_step_credit(
        self,
        trajectories: Sequence[Trajectory],
        step_tokens: Sequence[Sequence[int]],
        variant: DracoVariant | str,
        training_step: int | None = None,
    ) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
        """One group's per-step a_j (``step_tokens[i]``: rollout i's n_j, the tokens of each
        step's response) and each rollout's verdict record: the one place every trainer (the
        bundled one, the TRL integration) turns a group of trajectories into DRACO credit."""
        if not trajectories:
            return [], []
        result = self.score_group(trajectories[0].instruction, trajectories, variant=variant,
                                  training_step=training_step)
        values = [np.asarray(result.step_advantages(i, n_j), dtype=np.float64) for i, n_j in enumerate(step_tokens)]
        return values, [result.rollout_record(i) for i in range(len(trajectories))]

    def score_episode(self, traj: Trajectory, rubric: Rubric | None = None, step: int | None = None) -> RolloutScore:
        """A single episode against a static rubric: no group, so no dropout and A = 0;
        R is over every applicable criterion."""
        rubric = rubric or self.static_rubric
        if rubric is None:
            raise ValueError("score_episode needs a rubric (argument or DracoJudge(static_rubric=...))")
        score = self.score_rollout(traj.instruction, rubric.criteria, traj, 0, step)
        result = finish_group(DracoVariant.STATIC_CREDIT, traj.instruction, list(rubric.criteria), [score], None, dropout=False)
        return result.rollouts[0]


def finish_group(
    variant: DracoVariant,
    instruction: str,
    criteria: list[Criterion],
    rollouts: list[RolloutScore],
    note: str | None,
    dropout: bool = True,
) -> GroupResult:
    """Dropout, R_i, A_i and p/f counts from verdicts (pure bookkeeping, no calls)."""
    c = len(criteria)
    if c == 0 or not rollouts:
        surviving = np.zeros(c, dtype=bool)
        verdicts = np.zeros((len(rollouts), c), dtype=np.int64)
    else:
        verdicts = np.stack([r.verdict_codes() for r in rollouts])
        surviving = draco.discriminative_dropout(verdicts) if dropout else np.ones(c, dtype=bool)
    rewards = draco.rubric_rewards(verdicts, surviving) if c else np.zeros(len(rollouts))
    advantages = draco.group_advantages(rewards)
    out = []
    for i, r in enumerate(rollouts):
        if c:
            p, f = draco.citation_counts(verdicts[i], r.citation_matrix(), surviving)
        else:
            p = f = np.zeros(r.num_steps, dtype=np.int64)
        out.append(
            r.model_copy(
                update={
                    "reward": float(rewards[i]),
                    "advantage": float(advantages[i]),
                    "step_passes": [int(x) for x in p],
                    "step_fails": [int(x) for x in f],
                }
            )
        )
    return GroupResult(
        variant=variant,
        task_instruction=instruction,
        criteria=criteria,
        surviving=[bool(x) for x in surviving],
        rollouts=out,
        criteria_note=note,
    )
