"""tests/fork_server.py: a child of the fork server runs a script as ``python SCRIPT ARGS``
would, in its own environment and folder, and reports its exit code as ``subprocess`` does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fork_server import ForkServer

SCRIPT = """
import os, sys, signal, time
print("argv", sys.argv[1:], "cwd", os.getcwd(), "ONLY", os.environ.get("ONLY"), "HOME" in os.environ, __name__)
print("to stderr", file=sys.stderr)
how = sys.argv[1]
if how == "raise":
    raise ValueError("boom")
if how == "sleep":
    time.sleep(60)
if how == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
sys.exit(int(how))
"""


@pytest.fixture(scope="module")
def server():
    served = ForkServer(["json"], {"PATH": os.environ["PATH"], "HOME": "/nowhere"}, Path.cwd())
    yield served
    served.close()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    return path


def test_a_child_gets_its_own_arguments_environment_folder_and_output(server, script, tmp_path):
    child = server.launch(script, ["0"], {"ONLY": "this"}, tmp_path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0 and child.pid != os.getpid()
    assert out == f"argv ['0'] cwd {tmp_path} ONLY this False __main__\n"  # the server's HOME is not inherited
    assert err == "to stderr\n"


@pytest.mark.parametrize("how, code", [("3", 3), ("raise", 1)])
def test_exit_codes_are_the_scripts(server, script, tmp_path, how, code):
    child = server.launch(script, [how], {}, tmp_path)
    _, err = child.communicate(timeout=60)
    assert child.returncode == code
    assert ("ValueError: boom" in err) == (how == "raise")


def test_a_killed_or_stopped_child_reads_as_subprocess_reports_it(server, script, tmp_path):
    stopped = server.launch(script, ["stop"], {}, tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        stopped.wait(timeout=1)
    assert stopped.poll() is None  # alive, stopped
    stopped.kill()
    assert stopped.wait(timeout=60) == -signal.SIGKILL
    sleeping = server.launch(script, ["sleep"], {}, tmp_path)
    os.kill(sleeping.pid, signal.SIGTERM)
    assert sleeping.wait(timeout=60) == -signal.SIGTERM


def test_a_server_whose_import_fails_is_a_clear_error():
    with pytest.raises(RuntimeError, match="(?s)did not start.*No module named 'no_such_module_here'"):
        ForkServer(["no_such_module_here"], {"PATH": os.environ["PATH"]}, Path.cwd())


def test_closing_the_server_leaves_a_running_child_to_finish(script, tmp_path):
    served = ForkServer(["json"], {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(sys.path)}, Path.cwd())
    child = served.launch(script, ["5"], {}, tmp_path)
    served.close()
    assert served.process.returncode == 0
    assert child.wait(timeout=60) == 5
