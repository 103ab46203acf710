"""``rubricgym eval`` fails fast (issue 53, item 2): docs/eval.md's own agent example runs as
written from a fresh folder through the installed ``rubricgym`` script (the module imported from
the current folder, in the parent and in the spawned workers); a missing module, function or a
function that cannot take the messages exits 2 with the fix and writes nothing; a bad data
location is one line, not a traceback; ``--dry-run`` checks without playing (and without torch)."""

from __future__ import annotations

import http.server
import json
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from requirements_guard import need

from rubricgym.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "eval.md"


def docs_example() -> tuple[str, list[str]]:
    """docs/eval.md's ``my_agent.py`` and its ``rubricgym eval`` command, as written there."""
    text = DOCS.read_text()
    module = re.search(r"```python\n(# my_agent\.py\n.*?)```", text, re.S)
    command = re.search(r"^(rubricgym eval .*--callable my_agent:respond.*)$", text, re.M)
    assert module and command, "docs/eval.md lost its my_agent.py example"
    return module.group(1), shlex.split(command.group(1))


def rubricgym_command() -> list[str]:
    """The installed console script (its sys.path[0] is its bin folder, not the current one)."""
    script = Path(sys.executable).with_name("rubricgym")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "rubricgym.cli"]


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A fresh current folder; ``sys.path`` and the imported agents restored afterwards."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")  # the env made to check its data
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("setup_agent")]:
        del sys.modules[name]


def test_the_docs_agent_example_runs_as_written_from_a_fresh_folder(tmp_path):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    module, command = docs_example()
    (tmp_path / "my_agent.py").write_text(module)
    run = subprocess.run(rubricgym_command() + command[1:], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = tmp_path / command[command.index("--out") + 1]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["outcome"] == "truncated" and r["error"] is None for r in records), records
    assert all(s["response"] == "<think>I look around first.</think><action>look</action>"
               for r in records for s in r["step_records"])
    assert json.loads((out / "summary.json").read_text())["outcomes"]["policy_error"] == 0


@pytest.mark.parametrize("source, ref, said", [
    (None, "setup_agent_gone:respond", ["no module 'setup_agent_gone' in the current folder",
                                        "Fix: run from the folder holding setup_agent_gone.py"]),
    ("def respond(messages):\n    return 'x'\n", "setup_agent_a:reply", ["has no 'reply'", "Fix: name one of its "
                                                                          "functions: respond"]),
    ("def respond():\n    return 'x'\n", "setup_agent_b:respond", ["cannot be called with the chat messages",
                                                                     "Fix: define it as respond(messages)"]),
    ("import no_such_dependency_xyz\n", "setup_agent_c:respond", ["imports 'no_such_dependency_xyz', which is not "
                                                                  "installed"]),
    ("async def respond(messages):\n    return 'x'\n", "setup_agent_d:respond", ["async function",
                                                                              "rubricgym.evaluate"]),
])
def test_a_policy_that_cannot_be_called_exits_2_with_the_fix_and_writes_nothing(fresh, capsys, source, ref, said):
    if source is not None:
        (fresh / f"{ref.partition(':')[0]}.py").write_text(source)
    assert main(["eval", "--env", "ALFWorld-Rubric-v0", "--tasks", "t", "--policy", "callable", "--callable", ref,
                 "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert all(s in err for s in said) and f"(given: {ref}" in err and "Traceback" not in err, err
    assert not (fresh / "out").exists()


def test_bad_settings_read_as_one_line_without_pydantic_s_text(fresh, capsys):
    assert main(["eval", "--env", "ALFWorld-Rubric-v0", "--tasks", "t", "--samples", "0", "--policy", "endpoint",
                 "--base-url", "http://127.0.0.1:9/v1", "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert "--samples: Input should be greater than or equal to 1 (given: 0). Fix: see rubricgym eval --help" in err
    assert "pydantic" not in err and "validation error" not in err and len(err.strip().splitlines()) == 1, err
    assert not (fresh / "out").exists()


def test_a_data_location_without_data_is_one_line_in_eval_and_demo(fresh, capsys, monkeypatch):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    monkeypatch.setenv("ALFWORLD_DATA", str(fresh / "typo"))
    for argv in (["eval", "--env", "ALFWorld-Rubric-v0", "--n", "1", "--policy", "callable", "--callable", "x:y",
                  "--out", "out"],
                 ["eval", "--env", "ALFWorld-Rubric-v0", "--tasks", "t", "--policy", "callable", "--callable", "x:y",
                  "--out", "out"],
                 ["demo", "--env", "ALFWorld-Rubric-v0", "--plain"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "holds no ALFWorld games" in err and "unset ALFWORLD_DATA" in err and "Traceback" not in err, err
    assert sorted(p.name for p in fresh.iterdir()) == []


class _Any404(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dry_run_checks_the_endpoint_and_the_output_folder_and_plays_nothing(fresh, capsys):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Any404)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = ["eval", "--env", "ALFWorld-Rubric-v0", "--tasks", "t", "--policy", "endpoint", "--dry-run"]
        assert main([*base, "--base-url", f"http://127.0.0.1:{server.server_port}/v1", "--out", "out"]) == 0
        shown = capsys.readouterr().out
        assert "a server answers" in shown and "nothing was played or written" in shown, shown
        assert main([*base, "--base-url", f"http://127.0.0.1:{_closed_port()}/v1", "--out", "out"]) == 2
        assert "--base-url is not reachable" in capsys.readouterr().err
        (fresh / "done").mkdir()
        (fresh / "done" / "episodes.jsonl").write_text("")
        assert main([*base, "--base-url", f"http://127.0.0.1:{server.server_port}/v1", "--out", "done"]) == 2
        assert "pass --resume to continue it" in capsys.readouterr().err
    finally:
        server.shutdown()
    assert sorted(p.name for p in fresh.iterdir()) == ["done"]


def test_dry_runs_import_no_torch_and_write_nothing(tmp_path):
    """train's and eval's --dry-run in a fresh process: checked, no model loaded (no torch)."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    (tmp_path / "setup_agent_e.py").write_text("def respond(messages, task_id):\n    return 'x'\n")
    code = ("import sys\nfrom rubricgym.cli import main\n"
            "assert main(['train', '--dry-run', '--set', 'model.name=tiny', '--output-dir', 'runs']) == 0\n"
            "assert main(['eval', '--dry-run', '--env', 'ALFWorld-Rubric-v0', '--n', '2', '--policy', 'callable',"
            " '--callable', 'setup_agent_e:respond', '--out', 'out']) == 0\n"
            "print('torch loaded:', 'torch' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "torch loaded: False" in run.stdout, run.stdout
    assert "rubricgym train --dry-run: ready" in run.stdout and "rubricgym eval --dry-run: ready" in run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["setup_agent_e.py"]
