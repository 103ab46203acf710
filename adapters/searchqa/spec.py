"""SearchQA's benchmark spec (entry point ``rubricgym.benchmarks: searchqa``)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubricgym import BenchmarkSpec, EnvIdSpec
from rubricgym.adapters.searchqa.facts import SearchQABinding, SearchQAFacts
from rubricgym.benchmark import Resource

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.searchqa"


def missing_files(options: Mapping[str, Any]) -> str | None:
    """The user's question or corpus file (the local index is built from the corpus), when it
    is not a file; unset, the bundled ones are used. A retrieval server's index is its own."""
    keys = ["questions"]
    if not options.get("server_url") and options.get("retriever") is None:
        keys.append("corpus")
    for key in keys:
        value = options.get(key)
        if value is not None and not Path(value).is_file():
            return f"{key}={value} is not a file"
    return None


INDEX_FILES = Resource(
    name="its question file and the corpus its bm25s index is built from",
    fix="pass questions= (.jsonl or .parquet) and corpus= (.jsonl) files that exist, leave them unset for "
        "the bundled ones, or pass server_url= for a Search-R1 style retrieval server",
    check=f"{_PACKAGE}.spec:missing_files",
)

SPEC = BenchmarkSpec(
    name="SearchQA",
    description="search-augmented QA (Search-R1 protocol or the TRCA case-study grammar) over bm25s or a retrieval server",
    facts_model=SearchQAFacts,
    binding_model=SearchQABinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:SearchQAAdapter",
    extra="searchqa",
    requires=("bm25s", "httpx", "tenacity"),
    resources=(INDEX_FILES,),
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
