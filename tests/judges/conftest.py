"""Fixtures for the judge tests: a scripted OpenAI-compatible server on loopback, and
trajectories built through ``rubricgym.contract``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: make helpers importable

from judge_test_servers import ScriptedJudgeServer  # noqa: E402

from rubricgym.judges import JudgeSettings  # noqa: E402


@pytest.fixture
def scripted_server():
    servers = []

    def _make(mode: str = "ok", **kwargs) -> ScriptedJudgeServer:
        srv = ScriptedJudgeServer(mode=mode, **kwargs)
        servers.append(srv)
        return srv

    yield _make
    for srv in servers:
        srv.stop()


TEST_KEY_ENV = "RUBRICGYM_TEST_JUDGE_KEY"


@pytest.fixture
def settings_for(monkeypatch):
    """Settings for a scripted server; the key lives in an environment variable (settings
    only ever name it), ``key=...`` sets that variable for the test."""

    def _make(server, key: str = "sk-test-not-secret", **kwargs) -> JudgeSettings:
        monkeypatch.setenv(TEST_KEY_ENV, key)
        base = dict(base_url=server.base_url if server else "http://127.0.0.1:9/v1", model="scripted",
                    api_key_env=TEST_KEY_ENV, response_format="json_object_schema", timeout_s=5.0,
                    max_transport_retries=2, backoff_initial_s=0.01, backoff_max_s=0.05, concurrency=4)
        base.update(kwargs)
        return JudgeSettings(**base)

    return _make
