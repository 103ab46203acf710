"""Issue 28, item 6: a key this process read is redacted from everything it writes. A server
that echoes the key it was sent (``ScriptedJudgeServer(mode="echo_key")``, a real loopback
HTTP server) cannot put it into the judge cache, a judge verdict, a tau-bench observation or
info record, a run file, a log line or a CLI error message."""

from __future__ import annotations

import io
import json
import logging
import string
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from judges.judge_test_servers import ScriptedJudgeServer
from judges.judge_trajectories import make_trajectory
from redaction_isolation import own_registry
from requirements_guard import need

from rubricgym.atomic_files import atomic_write_text
from rubricgym.contract import save_jsonl
from rubricgym.judges import DracoJudge, JudgeSettings, ResponseCache, load_rubric
from rubricgym.registration import judge_rubric_file
from rubricgym.secret_refs import (MIN_REDACTED_CHARS, REDACTED, encoded_forms, install_log_redaction, read_secret,
                                   redact, redact_json, remember_secret)
from rubricgym.trainers.run_files import append_run_line, write_run_file

CANARY = "sk-canary-7c31e9a05fd24b68ae"
CANARY_ENV = "RUBRICGYM_REDACTION_CANARY_KEY"


@pytest.fixture
def echo_server():
    srv = ScriptedJudgeServer(mode="echo_key")
    yield srv
    srv.stop()


def _files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


# --- redact itself ---------------------------------------------------------------------------

# secrets drawn without '<' and '>' and never inside the marker: they cannot overlap it
SECRETS = st.text(alphabet=string.ascii_letters + string.digits + "-_.", min_size=8, max_size=40).filter(
    lambda s: s not in REDACTED)


@settings(max_examples=200, deadline=None)
@given(secrets=st.lists(SECRETS, min_size=1, max_size=4), text=st.text(max_size=200))
def test_redact_is_idempotent(secrets, text):
    with own_registry():
        for s in secrets:
            remember_secret(s)
        once = redact(text)
        assert redact(once) == once


@settings(max_examples=200, deadline=None)
@given(secrets=st.lists(SECRETS, min_size=1, max_size=4), data=st.data())
def test_redact_removes_every_remembered_value_embedded_anywhere(secrets, data):
    pieces = data.draw(st.lists(st.one_of(st.text(max_size=30), st.sampled_from(secrets)), min_size=1, max_size=8))
    text = "".join(pieces) + secrets[0]
    with own_registry():
        for s in secrets:
            remember_secret(s)
        out = redact(text)
    assert REDACTED in out
    assert not [s for s in secrets if s in out]


def _pieces(secrets: list[str]) -> set[str]:
    """Every piece of MIN_REDACTED_CHARS or more characters of every form of every secret."""
    return {f[i:j] for s in secrets for f in encoded_forms(s) for i in range(len(f))
            for j in range(i + MIN_REDACTED_CHARS, len(f) + 1)}


def _mask_oracle(text: str, secrets: list[str]) -> str:
    """The rule: every character inside some occurrence of a piece at least MIN_REDACTED_CHARS
    long of some secret (in any of its encoded forms) is hidden; each run of hidden characters
    becomes one marker (slow and plain, for comparison)."""
    hidden = [False] * len(text)
    for piece in _pieces(secrets):
        for i in range(len(text)):
            if text.startswith(piece, i):
                hidden[i:i + len(piece)] = [True] * len(piece)
    out = [REDACTED if h and (i == 0 or not hidden[i - 1]) else "" if h else c
           for i, (c, h) in enumerate(zip(text, hidden))]
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(secrets=st.lists(SECRETS, min_size=1, max_size=4), data=st.data())
def test_redact_hides_every_character_of_every_occurrence(secrets, data):
    first = secrets[0]
    start = data.draw(st.integers(0, len(first) - 8))  # secrets inside and overlapping each other
    secrets = [*secrets, first[start:start + 8], first[start:] + "-tail-of-it", "lead-in-" + first[:start + 8]]
    pieces = data.draw(st.lists(st.one_of(st.text(max_size=20), st.sampled_from(secrets)), max_size=10))
    text = "".join(pieces)
    with own_registry():
        for s in secrets:
            remember_secret(s)
        assert redact(text) == _mask_oracle(text, secrets)


def test_a_long_enough_piece_of_a_secret_is_hidden_wherever_it_stands():
    """The example CI drew: the secret's last 8 characters alone are a piece of it, so they are
    hidden (the rule: any piece of MIN_REDACTED_CHARS characters, anywhere)."""
    with own_registry():
        remember_secret("100000000")
        assert redact("00000000") == REDACTED == _mask_oracle("00000000", ["100000000"])
        assert redact("a 0000000 b") == "a 0000000 b"  # 7 characters: not a piece long enough
        remember_secret("sk-live-abcdefghijklmnop")
        split = "key part one sk-live-abcd, part two efghijklmnop done"  # echoed in two pieces
        assert redact(split) == f"key part one {REDACTED}, part two {REDACTED} done"


@settings(max_examples=200, deadline=None)
@given(secrets=st.lists(SECRETS, min_size=1, max_size=4), text=st.text(max_size=200))
def test_redact_leaves_text_without_a_secret_unchanged(secrets, text):
    with own_registry():
        for s in secrets:
            remember_secret(s)
        if not any(piece in text for piece in _pieces(secrets)):
            assert redact(text) == text
            assert redact_json({"k": [text, 1]}) == {"k": [text, 1]}


@settings(max_examples=100, deadline=None)
@given(secret=SECRETS, before=st.text(max_size=30), after=st.text(max_size=30), data=st.data())
def test_a_key_cut_by_truncation_leaves_no_fragment_of_eight_characters_or_more(secret, before, after, data):
    """An observation or message truncated inside the key: the head that ends the text, or the
    tail that starts it, is redacted too."""
    k = data.draw(st.integers(MIN_REDACTED_CHARS, len(secret)))
    with own_registry():
        remember_secret(secret)
        head, tail = redact(before + secret[:k]), redact(secret[-k:] + after)
        assert secret[:k] not in head and secret[-k:] not in tail and REDACTED in head and REDACTED in tail


def test_a_key_echoed_encoded_is_redacted_in_every_form():
    """A server that echoes the key percent-encoded (a URL or form body), JSON-escaped, or in
    base64 (a basic-auth header, an encoded token)."""
    import base64
    from urllib.parse import quote

    key = 'sk-odd/key+with"quote=é'
    remember_secret(key)
    raw = key.encode()
    echoes = [quote(key, safe=""), quote(key), json.dumps(key), json.dumps(key, ensure_ascii=False),
              base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("=")]
    for echo in echoes:
        text = redact(f"server said: {echo} (done)")
        assert echo.strip('"') not in text and REDACTED in text, echo


def test_an_uncaught_exception_s_traceback_is_redacted(tmp_path):
    """stderr is often a log file: the traceback Python prints for an exception nobody caught
    (in the main thread or another) goes through redaction once the CLI set it up."""
    import os
    import subprocess
    import sys

    program = (
        "import threading\n"
        "from rubricgym.secret_refs import install_log_redaction, read_secret\n"
        f"key = read_secret(env={CANARY_ENV!r}).get_secret_value()\n"
        "install_log_redaction()\n"
        "t = threading.Thread(target=lambda: (_ for _ in ()).throw(RuntimeError('thread saw ' + key)))\n"
        "t.start(); t.join()\n"
        "raise ValueError('main saw ' + key)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                         env={**os.environ, CANARY_ENV: CANARY})
    assert out.returncode == 1
    assert f"ValueError: main saw {REDACTED}" in out.stderr and f"RuntimeError: thread saw {REDACTED}" in out.stderr
    assert CANARY not in out.stderr + out.stdout


def test_overlapping_secrets_leave_no_part_behind_and_short_values_are_not_remembered():
    remember_secret("AAAAAAAA1234")
    remember_secret("1234BBBBBBBB")
    remember_secret("inner-12345678")
    remember_secret("prefix-inner-12345678-suffix")
    remember_secret("short")  # under 8 characters: would cut common words out of text
    assert redact("xAAAAAAAA1234BBBBBBBBy and a short word") == f"x{REDACTED}y and a short word"
    assert redact("[prefix-inner-12345678-suffix] [inner-12345678]") == f"[{REDACTED}] [{REDACTED}]"


def test_values_read_by_read_secret_are_redacted_in_json_text_and_structures(tmp_path, monkeypatch):
    quoted = 'sk-"quoted"\\key-é-123456'  # escaped differently inside JSON text
    key_file = tmp_path / "key"
    key_file.write_text(quoted + "\n")
    monkeypatch.setenv(CANARY_ENV, CANARY)
    assert read_secret(file=key_file).get_secret_value() == quoted
    assert read_secret(env=CANARY_ENV).get_secret_value() == CANARY
    doc = {CANARY: ["says " + quoted, {"nested": (CANARY, 3)}], "n": 1.5}
    for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False)):
        clean = redact(text)
        assert CANARY not in clean and quoted not in clean and json.dumps(quoted)[1:-1] not in clean
        assert json.loads(clean) == {REDACTED: [f"says {REDACTED}", {"nested": [REDACTED, 3]}], "n": 1.5}
    assert redact_json(doc) == {REDACTED: [f"says {REDACTED}", {"nested": (REDACTED, 3)}], "n": 1.5}


def test_the_registry_is_safe_to_fill_from_threads():
    values = [[f"thread-{t}-secret-{i:04d}" for i in range(50)] for t in range(8)]
    threads = [threading.Thread(target=lambda vs=vs: [remember_secret(v) for v in vs]) for vs in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = " ".join(v for vs in values for v in vs)
    assert redact(everything) == " ".join([REDACTED] * 400)


# --- the judge: cache and verdicts -----------------------------------------------------------

def _judge(server: ScriptedJudgeServer, cache: Path) -> DracoJudge:
    settings = JudgeSettings(base_url=server.base_url, model="scripted", api_key_env=CANARY_ENV,
                             response_format="json_object_schema", cache_dir=str(cache), timeout_s=10,
                             max_repairs=0, max_transport_retries=0)
    return DracoJudge.from_settings(settings, static_rubric=load_rubric(judge_rubric_file("AppWorld")))


def test_a_judge_server_echoing_the_key_leaves_it_in_no_cache_byte_nor_verdict(tmp_path, echo_server, monkeypatch):
    need("openai", "pip install 'rubricgym[judge]'")
    monkeypatch.setenv(CANARY_ENV, CANARY)
    cache = tmp_path / "judge-cache"
    trajs = [make_trajectory(seed=i, observations=[f"obs {i}.{j}" for j in range(2 + i)]) for i in range(2)]
    first = _judge(echo_server, cache).score_group(trajs[0].instruction, trajs, "static/no_credit")
    calls = len(echo_server.requests)
    assert calls and echo_server.auth_headers == [f"Bearer {CANARY}"] * calls  # the key was sent, and echoed
    assert all(v.reason == f"key {REDACTED}" for r in first.rollouts for v in r.verdicts)  # echoed, redacted
    assert CANARY not in first.model_dump_json()
    stored = ResponseCache(cache)
    assert len(stored) == calls
    assert not _files_holding(cache, CANARY)  # the sqlite file, its WAL and shared memory
    # a second judge answers from the cache: the same verdicts, and no new call
    again = _judge(echo_server, cache).score_group(trajs[0].instruction, trajs, "static/no_credit")
    assert len(echo_server.requests) == calls and again.model_dump() == first.model_dump()
    stored.close()


def test_the_cache_stores_no_remembered_key_whatever_it_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv(CANARY_ENV, CANARY)
    read_secret(env=CANARY_ENV)
    cache = ResponseCache(tmp_path)
    cache.put("k", {"text": f"echo {CANARY}", "nested": {CANARY: [CANARY]}})
    assert cache.get("k") == {"text": f"echo {REDACTED}", "nested": {REDACTED: [REDACTED]}}
    cache.close()
    assert not _files_holding(tmp_path, CANARY)


# --- tau-bench: the LLM user's replies -------------------------------------------------------

def test_a_user_server_echoing_the_key_leaves_it_in_no_observation_info_or_trajectory(tmp_path, echo_server,
                                                                                      monkeypatch):
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    need("openai", "pip install 'rubricgym[tau_bench]'")
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the envs)

    monkeypatch.setenv(CANARY_ENV, CANARY)
    user = {"base_url": echo_server.base_url, "model": "echo", "api_key_env": CANARY_ENV, "timeout_s": 10,
            "max_transport_retries": 0}
    env = gym.make("TauBench-Retail-Rubric-v0", user="llm", llm_user=user, max_steps=4)
    obs, info = env.reset(seed=0, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    seen = [obs, repr(info)]
    obs, _, _, _, info = env.step("<action>Could you tell me your name, please?</action>")
    seen += [obs, repr(info), info["transition"].model_dump_json()]
    assert echo_server.auth_headers == [f"Bearer {CANARY}"] * 2  # the opening line and one reply
    assert info["transition"].facts.user_reply.startswith(f"You sent the key {REDACTED}.")
    assert f"user: You sent the key {REDACTED}." in obs
    assert not [i for i, text in enumerate(seen) if CANARY in text]
    assert CANARY not in env.unwrapped.trajectory.to_json_line()
    save_jsonl(tmp_path / "traj.jsonl", [env.unwrapped.trajectory])
    assert not _files_holding(tmp_path, CANARY)
    env.close()


# --- run files, logs and CLI errors ----------------------------------------------------------

def test_run_file_writers_redact_keys_read_by_this_process(tmp_path):
    key_file = tmp_path / "secrets" / "key"
    key_file.parent.mkdir()
    key_file.write_text(CANARY + "\n")
    read_secret(file=key_file)
    run = tmp_path / "run"
    traj = make_trajectory(observations=[f"the tool printed {CANARY}", "done"])  # e.g. a tool that echoes it
    run.mkdir()
    save_jsonl(run / "trajectories.jsonl", [traj])
    write_run_file(run / "iter-000001.jsonl", traj.to_json_line() + "\n")
    append_run_line(run / "metrics.jsonl", json.dumps({"iteration": 1, "note": CANARY}))
    atomic_write_text(run / "summary.json", json.dumps({"error": f"server said {CANARY}"}))
    assert not _files_holding(run, CANARY)
    assert json.loads((run / "metrics.jsonl").read_text())["note"] == REDACTED
    saved = json.loads((run / "trajectories.jsonl").read_text())
    assert saved["transitions"][0]["observation"] == f"the tool printed {REDACTED}"  # still a valid trajectory


def test_log_records_through_configured_handlers_are_redacted(monkeypatch):
    monkeypatch.setenv(CANARY_ENV, CANARY)
    read_secret(env=CANARY_ENV)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        install_log_redaction()
        log = logging.getLogger("rubricgym.test_redaction")
        log.warning("the server answered %s", f"key={CANARY}")
        try:
            raise RuntimeError(f"bad reply holding {CANARY}")
        except RuntimeError:
            log.exception("call failed (%d)", 3)
    finally:
        root.removeHandler(handler)
    text = stream.getvalue()
    assert "the server answered key=<redacted secret>" in text and "call failed (3)" in text
    assert f"RuntimeError: bad reply holding {REDACTED}" in text and CANARY not in text


def test_cli_error_messages_do_not_print_a_key_this_process_read(tmp_path, monkeypatch, capfd):
    """A trajectory file holding the key (written by another tool): the judge CLI's error
    quotes the bad value; once this process has read the key, the message is redacted."""
    from rubricgym.cli import main

    monkeypatch.setenv(CANARY_ENV, CANARY)
    bad = tmp_path / "trajs.jsonl"
    bad.write_text(json.dumps({"benchmark": "base", "task_id": "t", "seed": CANARY}) + "\n")
    read_secret(env=CANARY_ENV)  # as a process whose judge client is built
    assert main(["judge", str(bad), "--out", str(tmp_path / "out.jsonl"), "--api-key-env", CANARY_ENV]) == 2
    out, err = capfd.readouterr()
    assert "rubricgym judge:" in err and REDACTED in err
    assert CANARY not in out + err
