"""A judge that thinks first (issue 49, item 3): the thinking is stripped before the verdict's
JSON is read, so a JSON object inside the thinking is never the answer; a reply cut off while
thinking is an invalid answer (re-asked, then unanswered), never a guess; and the per-phase
token caps grow by ``max_thinking_tokens`` when the judge thinks."""

from __future__ import annotations

import pytest

from rubricgym.judges.client import ChatReply, ChatRequest
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.ledger import Ledger
from rubricgym.judges.schemas import score_answer_model
from rubricgym.judges.structured import StructuredCaller, strip_thinking

SCORE = score_answer_model(["c1", "c2"], max_citations=4, with_reason=False)
ANSWER = '{"c1": {"verdict": "pass", "steps": [2]}, "c2": {"verdict": "fail", "steps": [0]}}'
DECOY = '{"c1": {"verdict": "fail", "steps": [1]}, "c2": {"verdict": "pass", "steps": []}}'


class Replies:
    """A backend that answers with the given replies in turn."""

    max_concurrency = None
    enforces_schema = False
    thinks_by_default = False

    def __init__(self, *texts: str, finish_reason: str = "stop"):
        self.texts, self.requests, self.finish_reason = list(texts), [], finish_reason

    def identity(self):
        return {"backend": "replies"}

    def complete(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        return ChatReply(text=self.texts.pop(0), completion_tokens=10, finish_reason=self.finish_reason)


def _call(backend: Replies):
    request = ChatRequest(phase="score", messages=[{"role": "user", "content": "score"}], schema_name="draco_score",
                          json_schema={}, max_tokens=64)
    return StructuredCaller(backend, Ledger(), max_repairs=1).call(request, SCORE)


@pytest.mark.parametrize("reply", [
    f"<think>\nFirst draft: {DECOY}\nNo: step 2 finished it.\n</think>\n\n{ANSWER}",  # Qwen3's form
    f"The prompt opened the thinking; draft {DECOY}, but no.\n</think>\n{ANSWER}",  # DeepSeek-R1's form
    f"<thinking>{DECOY}</thinking>{ANSWER}",
    f"<|begin_of_thought|>{DECOY}<|end_of_thought|> {ANSWER}",
])
def test_the_answer_after_the_thinking_is_read_never_the_one_inside_it(reply):
    result = _call(Replies(reply))
    assert result.value is not None and result.attempts == 1
    dumped = result.value.model_dump(by_alias=True)
    assert dumped["c1"]["verdict"] == "pass" and dumped["c2"]["steps"] == [0]


def test_a_reply_cut_off_while_thinking_is_invalid_and_re_asked_without_the_thinking():
    backend = Replies(f"<think>I believe {DECOY} but let me check step", f"<think>ok</think>{ANSWER}",
                      finish_reason="length")
    result = _call(backend)
    assert result.value is not None and result.attempts == 2
    repair = backend.requests[1].messages
    assert "only thinking" in repair[-1]["content"] and "cut off" in repair[-1]["content"]
    assert repair[-2]["content"] == ""  # the echoed answer part: the thinking is not sent back
    assert _call(Replies("<think>never closed", "<think>again")).value is None


def test_strip_thinking_is_linear_on_hostile_replies():
    text = "</think><think>" * 20_000 + "{}"
    assert strip_thinking(text) == ""  # every span opened is closed by the next: nothing is left but the cut
    assert strip_thinking("<think>" * 50_000) == ""
    assert strip_thinking("no thinking {}") == "no thinking {}"


def test_the_caps_grow_by_the_thinking_allowance_when_the_judge_thinks():
    settings = JudgeSettings(max_tokens_score=300, max_thinking_tokens=900)
    assert settings.max_tokens("score") == 300 and settings.max_tokens("score", thinking=True) == 1200

    from rubricgym.judges.pipeline import DracoJudge
    from rubricgym.judges.rubric import Criterion
    from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition

    trajectory = Trajectory(benchmark="base", task_id="t", instruction="do it", transitions=[
        Transition(step=0, response="", action=ParsedAction(ok=True, action="a"), observation="o", facts=Facts())])
    for thinking, default, cap in ((None, False, 300), (None, True, 1200), (True, False, 1200), (False, True, 300)):
        backend = Replies()
        backend.thinks_by_default = default
        judge = DracoJudge(backend, settings.model_copy(update={"thinking": thinking}))
        request = judge.score_request("do it", [Criterion(id="c1", text="criterion one")], trajectory, 0)
        assert request.max_tokens == cap, (thinking, default)
