"""The llama.cpp server command: one thread setting for generation and prompt evaluation."""

from __future__ import annotations

import sys
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
