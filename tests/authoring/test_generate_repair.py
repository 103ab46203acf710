"""`rubricgym library generate` end to end against a scripted OpenAI-compatible server on
127.0.0.1: the first answer holds an invalid operator, the repair call replaces it, the
written library validates, and every attempt with its cost is in the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from requirements_guard import need
from rubricgym.registration import operator_library
from scripted_llm import ScriptedLLM

from rubricgym.cli import main
from rubricgym.registration import get_spec
from rubricgym.trca import load_library

ENV = "ALFWorld-Rubric-v0"
KEY_ENV = "RUBRICGYM_TEST_GENERATE_KEY"
KEY = "sk-generate-test-not-a-real-key"


def shipped_operator(op_id: str) -> dict:
    """An operator of the shipped library as the model would answer it (no category/reads/needs)."""
    data = yaml.safe_load(operator_library("ALFWorld").read_text())
    op = next(o for o in data["operators"] if o["id"] == op_id)
    return {"id": op["id"], "description": op["description"], "condition": op["condition"],
            "examples": [{k: v for k, v in ex.items() if k in ("expected", "facts", "binding", "coverage")}
                         for ex in op["examples"]]}


BROKEN = {"id": "wasted_step", "description": "the step did nothing",
          "condition": "facts.no_such_fact && facts.parsed",
          "examples": [{"expected": True, "facts": {"parsed": True}}, {"expected": False, "facts": {"parsed": False}}]}
FIRST = json.dumps({"evidence": [shipped_operator("target_first_seen")], "invalidity": [BROKEN],
                    "execution": [shipped_operator("picked_target")]})
SECOND = json.dumps({"invalidity": [shipped_operator("parse_failure")]})


@pytest.fixture
def llm():
    servers = []

    def _make(replies):
        srv = ScriptedLLM(replies)
        servers.append(srv)
        return srv

    yield _make
    for srv in servers:
        srv.stop()


def generate(srv: ScriptedLLM, out: Path, monkeypatch, *extra: str) -> int:
    need("alfworld", "textworld")
    monkeypatch.setenv(KEY_ENV, KEY)
    return main(["library", "generate", "--env", ENV, "--out", str(out), "--per-category", "1", "--examples", "1",
                 "--base-url", srv.base_url, "--model", "scripted", "--api-key-env", KEY_ENV,
                 "--response-format", "json_object_schema", "--timeout", "10", *extra])


@pytest.mark.slow
def test_an_invalid_operator_is_explained_and_regenerated(llm, tmp_path, monkeypatch, capsys):
    srv = llm([FIRST, SECOND])
    out = tmp_path / "generated.yaml"
    assert generate(srv, out, monkeypatch) == 0
    err = capsys.readouterr().err
    assert "rejected wasted_step (invalidity): [unknown_fact] condition reads facts.no_such_fact" in err

    # two calls: the first asks for every category, the repair only for the rejected operator
    assert len(srv.requests) == 2
    first, second = srv.requests
    assert set(first["response_format"]["schema"]["properties"]) == {"evidence", "invalidity", "execution"}
    assert set(second["response_format"]["schema"]["properties"]) == {"invalidity"}
    prompt = first["messages"][-1]["content"]
    spec = get_spec(ENV)
    for needle in ("evidence", "invalidity", "execution", "deterministic Boolean CEL", "Missing evidence means 0",
                   "No subjective words", "No step-specific or task-specific rules", "new_object_types",
                   "target_type", "<action>", "exactly 1 evidence, 1 invalidity, 1 execution"):
        assert needle in prompt, needle
    assert all(f'"{name}"' in prompt for name in spec.facts_model.model_json_schema()["properties"])  # the schema
    assert "<<<BEGIN DATA kind=example_tasks" in prompt and '"admissible_actions"' in prompt  # real resets
    repair = second["messages"][-1]["content"]
    assert "wasted_step" in repair and "no_such_fact" in repair and "exactly 1 invalidity" in repair
    assert all(h == f"Bearer {KEY}" for h in srv.auth_headers)

    # the written library is valid and holds the repaired operator, not the broken one
    lib = load_library(out, spec.facts_model, spec.binding_model, spec.name)
    assert lib.ids == ["target_first_seen", "picked_target", "parse_failure"]
    data = yaml.safe_load(out.read_text())
    assert data["facts_model"] == "rubricgym.adapters.alfworld.facts:ALFWorldFacts"

    ledger_text = (tmp_path / "generated.yaml.ledger.json").read_text()
    assert KEY not in ledger_text  # the key never reaches disk
    ledger = json.loads(ledger_text)
    a1, a2 = ledger["attempts"]
    assert (a1["phase"], a1["requested"], a1["received"]) == ("generate", {"evidence": 1, "invalidity": 1, "execution": 1}, 3)
    assert [r["id"] for r in a1["rejected"]] == ["wasted_step"] and a1["accepted"] == ["target_first_seen", "picked_target"]
    assert (a2["phase"], a2["requested"], a2["accepted"], a2["rejected"]) == (
        "repair", {"evidence": 0, "invalidity": 1, "execution": 0}, ["parse_failure"], [])
    assert a1["calls"] == a2["calls"] == 1 and a1["prompt_tokens"] > a2["completion_tokens"] > 0
    assert ledger["total"]["calls"] == 2 and ledger["settings"]["api_key_set"] is True


@pytest.mark.slow
def test_regeneration_is_bounded(llm, tmp_path, monkeypatch, capsys):
    """A model that never fixes its operator: exactly --max-attempts calls, then the invalid
    operator is dropped; with its category empty there is no valid library (exit 1) and the
    last candidate is left for a human to fix."""
    srv = llm([FIRST])
    out = tmp_path / "generated.yaml"
    assert generate(srv, out, monkeypatch, "--max-attempts", "3") == 1
    assert len(srv.requests) == 3
    err = capsys.readouterr().err
    assert "no valid library" in err and "no invalidity operators" in err
    ledger = json.loads((tmp_path / "generated.yaml.ledger.json").read_text())
    assert [a["attempt"] for a in ledger["attempts"]] == [1, 2, 3]
    assert [d["id"] for d in ledger["dropped"]] == ["wasted_step"]
    candidate = yaml.safe_load(out.read_text())
    assert "wasted_step" in [o["id"] for o in candidate["operators"]]


@pytest.mark.slow
def test_unusable_answers_are_recorded_not_fatal(llm, tmp_path, monkeypatch, capsys):
    srv = llm(["this is {not json", FIRST.replace(json.dumps(BROKEN), json.dumps(shipped_operator("repeated_action")))])
    out = tmp_path / "generated.yaml"
    assert generate(srv, out, monkeypatch) == 0
    ledger = json.loads((tmp_path / "generated.yaml.ledger.json").read_text())
    first, second = ledger["attempts"]
    assert first["error"] and first["phase"] == "generate" and second["phase"] == "generate"
    assert len(load_library(out).ids) == 3


def test_no_endpoint_says_how_to_get_one(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RUBRICGYM_JUDGE_BASE_URL", raising=False)
    assert main(["library", "generate", "--env", ENV, "--out", str(tmp_path / "x.yaml")]) == 2
    assert "rubricgym serve-llm" in capsys.readouterr().err
