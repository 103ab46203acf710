"""Issue 10, item 4: hostile judge replies. Size and nesting are bounded before decoding,
extraction is one linear scan, any bad reply becomes a counted ``unanswered`` verdict, and
``rubricgym judge`` always writes its results and ledger atomically (no traceback, no
stray temporary file)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from judges.judge_test_servers import ScriptedJudgeServer
from judges.judge_trajectories import make_trajectory

from rubricgym.contract import save_jsonl
from rubricgym.judges import DracoJudge, JudgeSettings, Verdict, load_rubric
from rubricgym.judges.structured import MAX_JSON_DEPTH, MAX_REPLY_CHARS, BadReply, extract_json_object
from rubricgym.registration import judge_rubric_file

HOSTILE = {
    "deep_nesting": "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads before the fix
    "deep_object": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "open_braces_200kb": "{" * 200_000,  # ~9 s of repeated raw_decode before the fix
    "open_braces_under_cap": "{" * (MAX_REPLY_CHARS - 1),
    "unclosed_string": '{"' + "{" * 60_000,
    "brace_prose_then_junk": "{not json} " * 5_000 + "{",
    "huge_digits": '{"x": ' + "9" * 50_000 + "}",
    "two_megabytes": "x" * 2_000_000,
    "raw_control_characters": '{"\x00": "\x1b[2J"}',  # not JSON (strict decoding)
    "not_an_object": "[1, 2, 3]",
    "empty": "",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_extraction_refuses_hostile_text_with_a_bad_reply(name):
    text = HOSTILE[name]
    with pytest.raises(BadReply):
        extract_json_object(text)


def test_extraction_still_finds_answers_in_chatter():
    answer = {"c1": {"verdict": "pass", "steps": [0, 2]}, "note": "braces } and { in a string"}
    blob = json.dumps(answer)
    for text in (blob, f"```json\n{blob}\n```", f"Sure! {{thinking}} here: {blob} done.",
                 "I think { the answer is " + blob, "{" * 3 + " oops " + blob):
        assert extract_json_object(text) == answer
    with pytest.raises(BadReply, match="levels deep"):
        extract_json_object('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1))


@given(st.text(alphabet=st.sampled_from('{}[]"\\ a:1,'), max_size=400))
def test_any_text_gives_an_object_or_a_bad_reply(text):
    try:
        assert isinstance(extract_json_object(text), dict)
    except BadReply:
        pass


def _settings(server: ScriptedJudgeServer, monkeypatch, **kw) -> JudgeSettings:
    monkeypatch.setenv("RUBRICGYM_TEST_JUDGE_KEY", "sk-test-not-secret")
    base = dict(base_url=server.base_url, model="scripted", api_key_env="RUBRICGYM_TEST_JUDGE_KEY",
                response_format="json_object_schema", timeout_s=10.0, max_transport_retries=0, max_repairs=1,
                concurrency=2)
    base.update(kw)
    return JudgeSettings(**base)


@pytest.fixture
def server():
    srv = ScriptedJudgeServer(mode="text")
    yield srv
    srv.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["deep_nesting", "open_braces_200kb", "deep_object", "huge_digits"])
def test_hostile_replies_become_counted_unanswered_verdicts(server, monkeypatch, name):
    server.reply_text = HOSTILE[name]
    judge = DracoJudge.from_settings(_settings(server, monkeypatch), static_rubric=load_rubric(judge_rubric_file("ALFWorld")))
    group = [make_trajectory(seed=i) for i in range(2)]
    res = judge.score_group(group[0].instruction, group, "static/credit", training_step=0)
    assert all(v.verdict is Verdict.UNANSWERED for r in res.rollouts for v in r.verdicts)
    score = judge.ledger.totals("score")
    assert score["calls"] == 2 * 2  # two rollouts, one repair each: bounded
    assert score["invalid_answers"] == 4 and score["unanswered_calls"] == 2
    assert score["unanswered_verdicts"] == sum(len(r.verdicts) for r in res.rollouts) > 0


@pytest.mark.timeout(300)
def test_cli_with_a_hostile_judge_writes_results_and_ledger_and_no_tmp(server, tmp_path, monkeypatch, capsys):
    from rubricgym.cli import main

    server.reply_text = HOSTILE["deep_nesting"]
    monkeypatch.setenv("RUBRICGYM_TEST_JUDGE_KEY", "sk-test-not-secret")
    monkeypatch.setenv("RUBRICGYM_JUDGE_MAX_REPAIRS", "0")
    src = tmp_path / "trajs.jsonl"
    save_jsonl(src, [make_trajectory(task_id=t, seed=s) for t in ("a", "b") for s in range(2)])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "results.jsonl").write_text("previous results\n")
    rc = main(["judge", str(src), "--out", str(out_dir / "results.jsonl"), "--rubric", "alfworld",
               "--base-url", server.base_url, "--model", "scripted", "--response-format", "json_object_schema",
               "--api-key-env", "RUBRICGYM_TEST_JUDGE_KEY", "--timeout", "10"])
    err = capsys.readouterr().err
    assert rc == 1 and "answered nothing" in err and "Traceback" not in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["results.jsonl", "results.jsonl.ledger.json"]  # no .tmp
    groups = [json.loads(x) for x in (out_dir / "results.jsonl").read_text().splitlines()]
    assert [g["task_id"] for g in groups] == ["a", "b"]
    assert all(r["unanswered"] == len(r["verdicts"]) > 0 for g in groups for r in g["rollouts"])
    ledger = json.loads((out_dir / "results.jsonl.ledger.json").read_text())
    assert ledger["total"]["calls"] == server.count() == 4
    assert ledger["total"]["invalid_answers"] == 4 and ledger["total"]["unanswered_calls"] == 4


def test_cli_refuses_a_hostile_trajectory_file_cleanly(tmp_path, capsys):
    from rubricgym.cli import main

    for name, text in (("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n"), ("junk.jsonl", "\x00\xff{{{\n")):
        src = tmp_path / name
        src.write_text(text)
        assert main(["judge", str(src), "--out", str(tmp_path / "r.jsonl")]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.startswith("rubricgym judge:")
    assert not list(tmp_path.glob("r.jsonl*")) and not list(tmp_path.glob(".*tmp"))
