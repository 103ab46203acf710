"""SearchQA's benchmark spec (entry point ``rubricgym.benchmarks: searchqa``)."""

from pathlib import Path

from rubricgym import BenchmarkSpec, EnvIdSpec
from rubricgym.adapters.searchqa.facts import SearchQABinding, SearchQAFacts

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.searchqa"

SPEC = BenchmarkSpec(
    name="SearchQA",
    description="search-augmented QA (Search-R1 protocol or the TRCA case-study grammar) over bm25s or a retrieval server",
    facts_model=SearchQAFacts,
    binding_model=SearchQABinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:SearchQAAdapter",
    extra="searchqa",
    requires=("bm25s", "httpx", "tenacity"),
    env_ids=(
        EnvIdSpec("SearchQA-Rubric-v0", {"split": "train"},
                  "bundled train questions over the bundled corpus; corpus=/questions= for your files",
                  eval_id="SearchQA-Rubric-Eval-v0"),
        EnvIdSpec("SearchQA-Rubric-Eval-v0", {"split": "eval"}, "bundled eval questions"),
    ),
    max_steps=12,
    operator_library=_HERE.parent.parent / "operator_libraries" / "searchqa.yaml",
    judge_rubric=_HERE / "rubric.yaml",
    context_key="grammar tool, retrieval stage (searches 0/1/2+), page, evidence stage (targets seen), answer stage",
    expert=f"{_PACKAGE}.expert:expert_actions",
)
