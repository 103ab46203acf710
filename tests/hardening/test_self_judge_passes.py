"""Issue 10, item 9: a self-judge test that can pass, not only "never guesses".

A tiny in-process model is taught (optimizer steps on the judge's own score prompts, its last
layer only) to answer "pass" for one rollout and "fail" for the other. The real self-judge
path - TransformersChatBackend, sampling at temperature > 0, k = 3 repeats, JSON
extraction, validation, all-must-pass aggregation, dropout - must then return those
verdicts, a surviving criterion and rewards of opposite sign.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from judges.judge_trajectories import make_trajectory

from rubricgym.judges import Criterion, DracoJudge, JudgeSettings, Rubric, TransformersChatBackend, Verdict
from rubricgym.models import build_tiny_model

RUBRIC = Rubric(name="tiny", criteria=[Criterion(id="paid", text="The agent paid Alice back.")])


def _answer(verdict: str) -> str:
    return json.dumps({"paid": {"verdict": verdict, "steps": [0]}})


def _taught_parameters(model) -> list[torch.nn.Parameter]:
    """The weights that do not feed any layer's keys and values at the prompt's positions: the
    last layer's query and output projections, its MLP and norm before it, and the final norm."""
    last = model.model.layers[-1]
    return [*last.self_attn.q_proj.parameters(), *last.self_attn.o_proj.parameters(),
            *last.post_attention_layernorm.parameters(), *last.mlp.parameters(), *model.model.norm.parameters()]


def _teach(model, tokenizer, prompts: list[torch.Tensor], answers: list[str], steps: int = 1500,
           learned: float = 1e-3) -> float:
    """Supervised steps on (prompt -> answer + eos), answer tokens only, until the mean loss is below
    ``learned`` (10x under what the test asserts; at most ``steps``); returns the last loss.

    Only :func:`_taught_parameters` learn, so the prompts' keys and values never change: each
    prompt runs through the model once and every step reads a copy of its cache (about 20 ms a
    step, where teaching every weight re-read the 2.6k prompt tokens: 0.5 s a step)."""
    taught = _taught_parameters(model)
    taught_ids = {id(p) for p in taught}
    frozen = [p for p in model.parameters() if id(p) not in taught_ids]
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(taught, lr=0.1)
    batch = []
    for prompt, answer in zip(prompts, answers):
        target = tokenizer(answer, add_special_tokens=False, return_tensors="pt").input_ids[0]
        target = torch.cat([target, torch.tensor([tokenizer.eos_token_id])])
        with torch.no_grad():
            cache = model(input_ids=prompt[:, :-1], use_cache=True).cache
        ids = torch.cat([prompt[0, -1:], target]).unsqueeze(0)  # the prompt's last token predicts the first
        labels = ids.clone()
        labels[0, 0] = -100
        batch.append((cache, ids, labels))
    for p in frozen:
        p.requires_grad_(False)
    model.train()
    loss = torch.tensor(0.0)
    try:
        for _ in range(steps):
            optimizer.zero_grad()
            loss = sum(model(input_ids=ids, labels=labels, cache=copy.deepcopy(cache)).loss
                       for cache, ids, labels in batch) / len(batch)
            if loss.item() < learned:  # taught: further steps only sharpen what sampling already returns
                break
            loss.backward()
            optimizer.step()
    finally:
        model.eval()
        for p in frozen:
            p.requires_grad_(True)
    return loss.item()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_self_judge_passes_a_good_rollout_and_fails_a_bad_one():
    model, tok = build_tiny_model(seed=0)
    settings = JudgeSettings(max_tokens_score=64, max_repairs=0, temperature=0.7, self_judge_repeats=3,
                             ask_reasons=False, max_observation_chars=100, max_response_chars=100)
    backend = TransformersChatBackend(model, tok, model_id="taught")
    judge = DracoJudge(backend, settings=settings, static_rubric=RUBRIC, self_judge=True)
    good = make_trajectory(task_id="t", seed=0, observations=["Logged in.", "Sent $20 to Alice."],
                           instruction="Pay back Alice.")
    bad = make_trajectory(task_id="t", seed=1, observations=["Logged in.", "Sent $20 to Bob."],
                          instruction="Pay back Alice.")
    criteria = RUBRIC.criteria
    prompts = [backend._prompt_ids(judge.score_request(good.instruction, criteria, t).messages) for t in (good, bad)]
    assert _teach(model, tok, prompts, [_answer("pass"), _answer("fail")]) < 0.01

    res = judge.score_group(good.instruction, [good, bad], "static/credit")
    led = judge.ledger.summary()["per_phase"]["score"]
    assert led["calls"] == 2 * 3 and led["unanswered_calls"] == 0 and led["invalid_answers"] == 0  # k = 3 each
    assert [r.verdicts[0].verdict for r in res.rollouts] == [Verdict.PASS, Verdict.FAIL]
    assert res.rollouts[0].verdicts[0].steps == [0]  # the citation survives aggregation
    assert res.surviving == [True]  # somebody failed: the criterion discriminates
    assert res.rewards[0] > 0 > res.rewards[1]
