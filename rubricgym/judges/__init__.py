"""DRACO LLM rubric judges (docs/design.md §5): criteria per group, verdicts with step citations.

Entry points: ``DracoJudge.score_group`` (trainer, one group of rollouts),
``RubricJudgeReward`` / ``JudgeRewardSpec`` (gymnasium), ``rubricgym judge`` (re-scoring).
Step-credit math is in ``rubricgym.credit.draco``.
"""

from rubricgym.credit.draco import DracoVariant
from rubricgym.judges.cache import ResponseCache
from rubricgym.judges.client import (
    ChatBackend,
    ChatReply,
    ChatRequest,
    JudgeTransportError,
    OpenAIChatBackend,
    TransformersChatBackend,
)
from rubricgym.judges.config import JudgeSettings, ResponseFormat
from rubricgym.judges.ledger import Ledger
from rubricgym.judges.pipeline import CriterionVerdict, DracoJudge, GroupResult, RolloutScore
from rubricgym.judges.rubric import Criterion, Rubric, load_rubric
from rubricgym.judges.schemas import Verdict
from rubricgym.judges.wrapper import JudgeRewardSpec, RubricJudgeReward

__all__ = [
    "ChatBackend",
    "ChatReply",
    "ChatRequest",
    "Criterion",
    "CriterionVerdict",
    "DracoJudge",
    "DracoVariant",
    "GroupResult",
    "JudgeRewardSpec",
    "JudgeSettings",
    "JudgeTransportError",
    "Ledger",
    "OpenAIChatBackend",
    "ResponseCache",
    "ResponseFormat",
    "RolloutScore",
    "Rubric",
    "RubricJudgeReward",
    "TransformersChatBackend",
    "Verdict",
    "load_rubric",
]
