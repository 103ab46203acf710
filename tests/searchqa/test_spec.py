"""SearchQA as a plugin: discovered spec, validated operator library, packaged judge rubric."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rubricgym.adapters.searchqa.facts import SearchQABinding, SearchQAFacts
from rubricgym.judges import load_rubric
from rubricgym.registration import env_ids, get_spec, judge_rubric_file, operator_library
from rubricgym.trca import load_library

ROOT = Path(__file__).resolve().parents[2]


def test_spec_is_discovered_with_both_env_ids():
    spec = get_spec("SearchQA")
    assert spec.facts_model is SearchQAFacts and spec.binding_model is SearchQABinding
    assert {e: b for e, b in env_ids().items() if b == "SearchQA"} == {
        "SearchQA-Rubric-v0": "SearchQA", "SearchQA-Rubric-Eval-v0": "SearchQA"}
    assert spec.load_binder()("Who founded Korvath Instruments?").target_entities == ["Korvath Instruments"]
    assert spec.load_expert() is not None and spec.context_key


def test_operator_library_is_valid_with_five_per_category():
    lib = load_library(operator_library("SearchQA"))
    assert lib.library.benchmark == "SearchQA"
    for category in ("evidence", "invalidity", "execution"):
        assert len([o for o in lib.operators if o.category == category]) == 5
    out = subprocess.run([sys.executable, "-W", "ignore", "-m", "rubricgym.cli", "library", "validate",
                          str(ROOT / "operator_libraries" / "searchqa.yaml"), "--env", "SearchQA-Rubric-v0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr


def test_packaged_judge_rubric():
    rubric = load_rubric(judge_rubric_file("SearchQA"))
    assert len(rubric.criteria) == 5 and any("grounded" in c.id for c in rubric.criteria)


def test_facts_schema_has_every_field_described():
    schema = SearchQAFacts.json_schema()["properties"]
    own = set(SearchQAFacts.model_fields) - set(SearchQAFacts.__mro__[1].model_fields)
    assert own and all(schema[f].get("description") for f in own)
