"""Faults against a real loopback HTTP server: 500, 429, hangs, malformed JSON, dead server;
retries, concurrency limit, cache reuse after a restart, and no API key anywhere on disk
or in logs."""

from __future__ import annotations

import json
import logging
import threading
import time

from judge_trajectories import make_trajectory

from rubricgym.judges import DracoJudge, Verdict, load_rubric
from rubricgym.registration import judge_rubric_file

SECRET = "sk-rubricgym-SECRET-7f3a9c2e1b"


def trajs(n: int = 2):
    return [make_trajectory(seed=i, observations=[f"obs {i}.{j}" for j in range(3)]) for i in range(n)]


def all_unanswered(res) -> bool:
    return all(v.verdict is Verdict.UNANSWERED for r in res.rollouts for v in r.verdicts)


def static_judge(settings):
    return DracoJudge.from_settings(settings, static_rubric=load_rubric(judge_rubric_file("ALFWorld")))


def test_retries_recover_from_transient_500_and_429(scripted_server, settings_for):
    srv = scripted_server()
    srv.plan = ["500", "429"]  # first two requests fail, then the server is fine
    judge = static_judge(settings_for(srv, concurrency=1, max_transport_retries=2))
    res = judge.score_group("x", trajs(1), "static/credit")
    assert not all_unanswered(res) and res.rollouts[0].unanswered == 0
    assert srv.count() == 3
    assert judge.ledger.summary()["total"]["transport_failures"] == 0


def test_persistent_errors_give_unanswered_verdicts_in_bounded_calls(scripted_server, settings_for):
    for mode in ("500", "429", "bad_body"):
        srv = scripted_server(mode)
        judge = static_judge(settings_for(srv, max_transport_retries=2))
        res = judge.score_group("x", trajs(2), "static/credit")
        assert all_unanswered(res), mode
        assert res.rewards.tolist() == [0.0, 0.0] and res.advantages.tolist() == [0.0, 0.0]
        assert all(r.judge_errors for r in res.rollouts)
        led = judge.ledger.summary()["total"]
        assert led["transport_failures"] == 2 and led["unanswered_verdicts"] == 2 * 5
        # 1 + 2 retries each for 5xx / 429; a 200 with a non-JSON body is not retried
        assert srv.count() == (2 * 3 if mode != "bad_body" else 2), mode


def test_hanging_server_times_out(scripted_server, settings_for):
    srv = scripted_server("hang", hang_s=120)
    judge = static_judge(settings_for(srv, timeout_s=0.5, max_transport_retries=1))
    t0 = time.monotonic()
    res = judge.score_group("x", trajs(2), "static/credit")
    elapsed = time.monotonic() - t0
    assert all_unanswered(res)
    assert srv.count() == 2 * 2  # 1 + 1 retry per rollout
    assert elapsed < 60, "the client waited for the hung server instead of timing out"
    assert "timeout" in res.rollouts[0].judge_errors[0]


def test_malformed_json_is_repaired_a_bounded_number_of_times(scripted_server, settings_for):
    srv = scripted_server("malformed")
    judge = static_judge(settings_for(srv, max_repairs=2))
    res = judge.score_group("x", trajs(2), "static/credit")
    assert all_unanswered(res)
    assert srv.count() == 2 * 3
    led = judge.ledger.summary()["per_phase"]["score"]
    assert led["invalid_answers"] == 6 and led["repairs"] == 4 and led["unanswered_calls"] == 2
    repair = srv.requests[-1]["messages"]
    assert repair[-2]["role"] == "assistant" and "could not be used" in repair[-1]["content"]
    # then the model recovers: a repair that parses gives real verdicts
    srv.plan, srv.mode = ["malformed"], "ok"
    res = static_judge(settings_for(srv, max_repairs=2, concurrency=1)).score_group("y", trajs(1), "static/credit")
    assert res.rollouts[0].unanswered == 0


def test_dead_server_is_a_recorded_failure(settings_for):
    judge = static_judge(settings_for(None, timeout_s=1.0, max_transport_retries=1))
    res = judge.score_group("x", trajs(1), "static/credit")
    assert all_unanswered(res) and "connection" in res.rollouts[0].judge_errors[0]


def test_concurrency_limit_is_respected(scripted_server, settings_for):
    srv = scripted_server(delay_s=0.3)
    judge = static_judge(settings_for(srv, concurrency=2))
    judge.score_group("x", trajs(6), "static/credit")
    assert srv.count() == 6 and srv.peak_in_flight == 2
    # the limit is per judge, not per group: two groups scored at once still share 2 slots
    srv.peak_in_flight = 0
    groups = [trajs(3), [make_trajectory(seed=10 + i) for i in range(3)]]
    threads = [threading.Thread(target=judge.score_group, args=("y", g, "static/credit")) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert srv.count() == 12 and srv.peak_in_flight == 2


def test_restart_with_same_cache_dir_makes_zero_new_calls(scripted_server, settings_for, tmp_path):
    srv = scripted_server()
    cache = tmp_path / "cache"
    group = trajs(3)
    first = DracoJudge.from_settings(settings_for(srv, cache_dir=str(cache)))
    r1 = first.score_group(group[0].instruction, group, "dynamic/credit", training_step=0)
    calls = srv.count()
    assert calls == first.ledger.summary()["total"]["calls"] > 0
    srv.stop()  # the server is gone; a new client on another port reads only the cache
    other = scripted_server()
    second = DracoJudge.from_settings(settings_for(other, cache_dir=str(cache)))
    r2 = second.score_group(group[0].instruction, group, "dynamic/credit", training_step=0)
    assert other.count() == 0
    tot = second.ledger.summary()["total"]
    assert tot["calls"] == 0 and tot["cache_hits"] == calls and tot["cost_usd"] == 0
    assert r1.model_dump() == r2.model_dump()


def test_api_key_never_reaches_disk_or_logs(scripted_server, settings_for, tmp_path, caplog):
    srv = scripted_server()
    srv.plan = ["500", "malformed"]
    run_dir = tmp_path / "run"
    settings = settings_for(srv, key=SECRET, cache_dir=str(run_dir / "cache"), concurrency=1)
    assert SECRET not in repr(settings) and SECRET not in json.dumps(settings.public_dump())
    with caplog.at_level(logging.DEBUG):
        judge = DracoJudge.from_settings(settings)
        group = trajs(2)
        res = judge.score_group(group[0].instruction, group, "full", training_step=1)
        judge.ledger.write(run_dir / "ledger.json")
        (run_dir / "result.json").write_text(res.model_dump_json())
        (run_dir / "settings.json").write_text(json.dumps(settings.public_dump()))
    assert srv.auth_headers and all(h == f"Bearer {SECRET}" for h in srv.auth_headers)  # it was used
    assert SECRET not in caplog.text
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("judge_cache") for p in files)
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p


def test_settings_come_from_the_environment(monkeypatch):
    from rubricgym.judges import JudgeSettings, ResponseFormat

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("RUBRICGYM_JUDGE_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("RUBRICGYM_JUDGE_MODEL", "smollm2")
    monkeypatch.setenv("RUBRICGYM_JUDGE_RESPONSE_FORMAT", "json_object_schema")
    s = JudgeSettings()
    assert (s.base_url, s.model, s.response_format) == ("http://127.0.0.1:8080/v1", "smollm2", ResponseFormat.JSON_OBJECT_SCHEMA)
    assert s.api_key().get_secret_value() == SECRET and SECRET not in repr(s) and SECRET not in str(s.public_dump())
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("RUBRICGYM_JUDGE_API_KEY", SECRET + "2")  # the documented fallback variable
    assert JudgeSettings().api_key().get_secret_value() == SECRET + "2"


def test_oversized_reply_is_refused_while_read_and_not_retried(scripted_server, settings_for):
    """A server that floods the judge (declared or streamed without a length) gets a
    classified 'reply_too_large' per call, no retries, and the client stops reading near
    the limit instead of holding the body."""
    for mode in ("huge_declared", "huge_streamed"):
        srv = scripted_server(mode)
        judge = static_judge(settings_for(srv, max_reply_bytes=256 << 10, max_transport_retries=2, concurrency=1))
        res = judge.score_group("x", trajs(1), "static/credit")
        assert all_unanswered(res), mode
        assert "reply_too_large" in res.rollouts[0].judge_errors[0], res.rollouts[0].judge_errors
        assert srv.count() == 1, f"{mode}: an oversized reply must not be asked for again"
        assert judge.ledger.summary()["total"]["transport_failures"] == 1
        deadline = time.monotonic() + 10
        while not srv.bytes_flooded and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.bytes_flooded and srv.bytes_flooded[0] < (256 << 20), f"{mode}: the client read the whole flood"


def test_thinking_reaches_an_http_endpoint_only_when_set(scripted_server, settings_for):
    srv = scripted_server()
    static_judge(settings_for(srv, concurrency=1)).score_group("x", trajs(1), "static/credit")
    assert srv.requests and all("chat_template_kwargs" not in body for body in srv.requests)
    srv.requests.clear()
    static_judge(settings_for(srv, concurrency=1, thinking=False)).score_group("x", trajs(1), "static/credit")
    assert srv.requests and all(body["chat_template_kwargs"] == {"enable_thinking": False} for body in srv.requests)


def test_a_retry_after_answer_is_honoured(scripted_server, settings_for):
    """429 with Retry-After: the wait is what the server asked (capped), then the call succeeds;
    without the header (or with an HTTP date) the exponential back-off applies."""
    import httpx
    import openai

    from rubricgym.judges.client import WaitRetryAfterOrExponential, retry_after_s

    def rate_limited(value):
        headers = {"retry-after": value} if value is not None else {}
        response = httpx.Response(429, headers=headers, request=httpx.Request("POST", "http://127.0.0.1/v1"))
        return openai.RateLimitError("rate limited", response=response, body=None)

    assert retry_after_s(rate_limited("3")) == 3.0 and retry_after_s(rate_limited("0.5")) == 0.5
    assert retry_after_s(rate_limited("Wed, 21 Oct 2026 07:28:00 GMT")) is None and retry_after_s(rate_limited(None)) is None

    class State:  # what tenacity hands a wait strategy: the failed attempt's outcome
        def __init__(self, exc):
            self.attempt_number = 1
            self.outcome = type("Outcome", (), {"failed": True, "exception": lambda _self: exc})()

    wait = WaitRetryAfterOrExponential(initial_s=0.01, max_s=2.0)
    assert wait(State(rate_limited("1.5"))) == 1.5 and wait(State(rate_limited("60"))) == 2.0
    assert wait(State(rate_limited(None))) < 0.1
    srv = scripted_server()
    srv.plan = ["429_retry_after"]
    judge = static_judge(settings_for(srv, concurrency=1, max_transport_retries=1, backoff_max_s=2.0))
    res = judge.score_group("x", trajs(1), "static/credit")
    assert not all_unanswered(res) and srv.count() == 2
