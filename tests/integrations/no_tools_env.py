"""The word task as a registered benchmark that declares no tool surface (its actions are not
tool calls), for the 'asked for tools' refusal."""

from __future__ import annotations

from typing import ClassVar

from trainer.word_env import WordAdapter, WordFacts

from rubricgym.adapter import TaskBinding
from rubricgym.benchmark import NO_TOOL_SURFACE, BenchmarkSpec, EnvIdSpec
from rubricgym.registration import register_benchmark

ENV_ID = "WordPickNoTools-Rubric-v0"


class NoToolsWordFacts(WordFacts):
    benchmark: ClassVar[str] = "WordPickNoTools"


class NoToolsWordAdapter(WordAdapter):
    benchmark = "WordPickNoTools"
    facts_model = NoToolsWordFacts


register_benchmark(BenchmarkSpec(
    name="WordPickNoTools", facts_model=NoToolsWordFacts, binding_model=TaskBinding,
    binder="trainer.word_env:expert_actions", adapter=f"{__name__}:NoToolsWordAdapter",
    env_ids=(EnvIdSpec(ENV_ID, {"reward": "none"}),), tool_surface=NO_TOOL_SURFACE,
))
