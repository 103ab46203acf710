"""Issue 10, item 2: secrets never reach disk. A key given as a config value is refused
(with how to pass it); a key passed the right way (an environment variable or a key file)
is used for the judge's requests and found in no file of the run folder, the judge cache,
the ledger, the results, nor in any log or console output."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from judges.judge_test_servers import ScriptedJudgeServer

from rubricgym.judges.config import JudgeSettings
from rubricgym.secret_refs import InlineSecretError, refuse_inline_secrets
from rubricgym.trainers.config import load_config
from rubricgym.trainers.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
CANARY = "sk-canary-0d9f2b7c4e1a63f8b5"
CANARY_ENV = "RUBRICGYM_CANARY_JUDGE_KEY"


def _settings(server: ScriptedJudgeServer, cache: Path, **key_ref: str) -> list[str]:
    options = {"base_url": server.base_url, "model": "scripted", "response_format": "json_object_schema",
               "cache_dir": str(cache), "max_repairs": 0, "timeout_s": 10, **key_ref}
    return [
        "model.name=tiny", "env.factory=word", "env.max_steps=1",
        "algorithm.advantage=draco_static_credit", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
        "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40", "run.iterations=1", "run.progress=false",
        "run.evaluate_after=false", "judge.static_rubric=alfworld", f"judge.options={json.dumps(options)}",
    ]


def _files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.fixture
def server():
    srv = ScriptedJudgeServer()
    yield srv
    srv.stop()


@pytest.mark.parametrize("where", ["api_key", "key", "token", "nested"])
def test_a_key_as_a_config_value_is_refused_with_how_to_pass_it(where):
    options = {"nested": {"password": CANARY}} if where == "nested" else {where: CANARY}
    with pytest.raises(ValueError) as err:
        load_config(None, [f"judge.options={json.dumps(options)}"])
    message = str(err.value)
    assert "api_key_env" in message and "api_key_file" in message
    assert CANARY not in message  # the refusal never echoes the key
    with pytest.raises(ValueError) as err:
        JudgeSettings(**options)
    assert CANARY not in str(err.value)


def test_a_value_shaped_like_a_key_is_refused_under_any_name():
    with pytest.raises(InlineSecretError, match="looks like an API key"):
        refuse_inline_secrets({"base_url": CANARY}, "judge.options")
    refuse_inline_secrets({"api_key_env": "OPENAI_API_KEY", "api_key_file": "~/.judge-key", "model": "gpt-4o"}, "x")


def test_cli_refuses_a_key_in_set_and_writes_nothing_holding_it(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "rubricgym.cli", "train", "--quiet", "--output-dir", str(tmp_path / "runs"),
         "--set", f"judge.options={{api_key: {CANARY}}}"],
        cwd=ROOT, timeout=300, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "api_key_env" in out.stderr and "Traceback" not in out.stderr
    assert CANARY not in out.stderr + out.stdout
    assert not (tmp_path / "runs").exists() or not _files_holding(tmp_path / "runs", CANARY)


@pytest.mark.slow
@pytest.mark.parametrize("via", ["env", "file"])
def test_canary_key_is_used_and_found_in_no_file(tmp_path, server, monkeypatch, caplog, capfd, via):
    run = tmp_path / "run"
    cache = run / "judge-cache"  # inside the run folder: scanned with it
    if via == "env":
        monkeypatch.setenv(CANARY_ENV, CANARY)
        ref = {"api_key_env": CANARY_ENV}
    else:
        key_file = tmp_path / "secrets" / "judge.key"
        key_file.parent.mkdir()
        key_file.write_text(CANARY + "\n")
        os.chmod(key_file, 0o600)
        ref = {"api_key_file": str(key_file)}
    with caplog.at_level(logging.DEBUG):
        trainer = Trainer(load_config(None, _settings(server, cache, **ref)), run)
        trainer.train()
        trainer.judge.ledger.write(run / "judge-ledger.json")
        trainer.close()
        # the stored trajectories re-scored by `rubricgym judge` with the same key reference
        from rubricgym.cli import main

        trajs = next((run / "trajectories").glob("*.jsonl"))
        key_args = ["--api-key-env", CANARY_ENV] if via == "env" else ["--api-key-file", ref["api_key_file"]]
        rc = main(["judge", str(trajs), "--out", str(run / "judged" / "results.jsonl"), "--rubric", "alfworld",
                   "--base-url", server.base_url, "--model", "scripted", "--response-format", "json_object_schema",
                   "--cache-dir", str(cache), *key_args])
    assert rc == 0
    assert server.auth_headers and set(server.auth_headers) == {f"Bearer {CANARY}"}  # the key was really used
    assert trainer.judge.ledger.totals("score")["calls"] > 0
    written = {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()}
    for expected in ("config.yaml", "metrics.jsonl", "judge-ledger.json", "judged/results.jsonl",
                     "judged/results.jsonl.ledger.json", "checkpoint-000001/trainer_state.json",
                     "judge-cache/judge_cache.sqlite"):
        assert expected in written, expected
    assert _files_holding(run, CANARY) == []
    captured = capfd.readouterr()
    assert CANARY not in caplog.text + captured.out + captured.err
    saved = load_config(run / "config.yaml")
    assert saved.judge.options.get("api_key_env" if via == "env" else "api_key_file")  # the reference, not the key


# ---- issue 28, item 6: secrets given where names or URLs are expected --------------------------
@pytest.mark.parametrize("override", [
    f"judge.options={{api_key_env: {CANARY}}}",             # the key given as the variable's name
    f"generation.server_api_key_env={CANARY}",
    f"generation.server_url=http://user:{CANARY}@127.0.0.1:8000/v1",  # user-info in a URL
    f"judge.options={{base_url: 'https://me:{CANARY}@judge.example/v1'}}",
    f"env.kwargs={{api_key: {CANARY}}}",                    # a key in an env's keyword arguments
    "env.kwargs={token: not-a-provider-shaped-token}",
])
def test_a_key_where_a_name_or_url_is_expected_is_refused_without_echoing_it(override, capsys):
    from rubricgym.cli import main

    with pytest.raises(ValueError, match="api_key_env") as err:
        load_config(None, [override])
    assert CANARY not in str(err.value)
    assert main(["train", "--set", override]) == 2
    out = capsys.readouterr()
    assert "bad configuration" in out.err and CANARY not in out.err + out.out


def test_a_variable_name_and_a_plain_url_are_still_accepted():
    config = load_config(None, ["generation.server_api_key_env=MY_GENERATION_KEY",
                                "generation.server_url=http://127.0.0.1:8000/v1",
                                "judge.options={api_key_env: RUBRICGYM_JUDGE_KEY, api_key_file: ~/.judge-key}"])
    assert config.generation.server_api_key_env == "MY_GENERATION_KEY"
    with pytest.raises(ValueError, match="URL carries credentials") as err:
        JudgeSettings(base_url=f"http://u:{CANARY}@127.0.0.1:9/v1")
    assert CANARY not in str(err.value)


def test_a_key_passed_to_gym_make_is_refused_before_gymnasium_can_echo_it():
    """gymnasium's TypeError prints every kwarg of a failed env creator; a key must never get there."""
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the env ids)

    for kwargs in ({"api_key": CANARY}, {"engine_options": {"auth": f"https://u:{CANARY}@shop.example"}}):
        with pytest.raises(InlineSecretError) as err:
            gym.make("WebShop-Rubric-v0", **kwargs)
        assert CANARY not in str(err.value)
