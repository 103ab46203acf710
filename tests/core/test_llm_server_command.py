"""The llama.cpp server command: one thread setting for generation and prompt evaluation."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from rubricgym.llm_server import LocalLLMServer


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


@pytest.mark.parametrize("threads", [None, 1, 3])
def test_prompt_evaluation_gets_the_generation_threads(tmp_path: Path, threads: int | None):
    # llama-cpp-python gives prompt evaluation every core unless told: beside a busy process
    # that was no faster on 8-57% more CPU (benchmarks/llama_threads.py)
    server = LocalLLMServer(threads=threads, python=Path(sys.executable), model_path=tmp_path / "m.gguf")
    command = server.command
    assert _flag(command, "--n_threads") == _flag(command, "--n_threads_batch") == str(server.threads)
    if threads is not None:
        assert server.threads == threads


def test_a_server_that_cannot_start_says_why_and_leaves_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the main venv has no llama_cpp: the child exits at once. Its own words reach the error, and
    # the temporary log is gone (the test suite starts many servers; none may leave files behind)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    server = LocalLLMServer(threads=1, python=Path(sys.executable), model_path=tmp_path / "m.gguf")
    with pytest.raises(RuntimeError, match="exited with") as failure:
        server.start()
    assert "llama_cpp" in str(failure.value)
    assert server.log_path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_given_log_path_is_kept(tmp_path: Path):
    log = tmp_path / "llama.log"
    server = LocalLLMServer(threads=1, python=Path(sys.executable), model_path=tmp_path / "m.gguf", log_path=log)
    with pytest.raises(RuntimeError):
        server.start()
    assert server.log_path == log and "llama_cpp" in log.read_text()
