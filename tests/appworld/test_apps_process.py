"""The apps and the world's databases live outside the code shell's sandbox (issue 28, item 2):
agent code reaches them only as app API calls over the apps' socket, so writing the databases
directly - through AppWorld's in-process app objects, or with sqlite3 on the world's database -
changes nothing that is evaluated, and AppWorld's state routes (``/dbs``, ``/date_time``) are
not on that socket. Each write route first proves it works where the databases live in the
process that runs the code (``sandbox=False``, AppWorld's own layout), so the test can fail."""

from __future__ import annotations

import json
import os
import runpy
import sqlite3
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest
from appworld_helpers import task

import rubricgym
import rubricgym.adapters.appworld
from rubricgym.adapters.appworld.paths import appworld_python, offline_data_root

pytestmark = pytest.mark.slow
WRITES = {  # each deletes every note: the task's note with it
    "app objects": ("u = __import__('appworld.common.' + 'utils', fromlist=['x'])\n"
                    "con = getattr(u, 'import_models_module')('simple_note').SQLModel.db.connection\n"),
    # sqlite3.connect is null-patched by AppWorld's guard; the class it returns is not
    "sqlite3 on the world's database": ("sq = __import__('sql' + 'ite3')\n"
                                        "con = getattr(sq, 'Conn' + 'ection')('file:task_output-{task_id}/"
                                        "simple_note.db?mode=memory&cache=shared', uri=True)\n"),
}
DELETE = "con.execute('DELETE FROM notes')\ncon.commit()\nprint('deleted', con.execute('SELECT COUNT(*) FROM notes').fetchone())"


@pytest.fixture(scope="module")
def envs():
    made = {name: gym.make("AppWorld-Rubric-v0", reward="none", split="offline_all", sandbox=name == "sandboxed")
            for name in ("sandboxed", "in-process")}
    yield made
    for env in made.values():
        env.close()


def solve_with(env, task_id: str, extra: str) -> tuple[float, bool, str]:
    """The expert's solution with ``extra`` run just before its last (completing) step."""
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task_id})
    plan = rubricgym.get_spec("AppWorld-Rubric-v0").load_expert()(adapter)
    for action in plan[:-1]:
        assert not env.step(adapter.grammar.render(action))[2]
    extra_obs = env.step(adapter.grammar.render(extra))[0]
    _, reward, terminated, _, info = env.step(adapter.grammar.render(plan[-1]))
    assert terminated, info
    return reward, info["outcome"].success, extra_obs


@pytest.mark.parametrize("route", WRITES)
def test_writing_the_databases_directly_does_not_change_the_evaluated_state(envs, route):
    task_id = task("notebyname")["id"]
    code = WRITES[route].format(task_id=task_id) + DELETE
    reward, success, obs = solve_with(envs["in-process"], task_id, code)
    assert "deleted (0,)" in obs and reward == 0.0 and not success, obs  # the route works where the dbs are
    reward, success, obs = solve_with(envs["sandboxed"], task_id, code)
    assert "deleted" not in obs, obs  # no database of the world where agent code runs
    assert reward == 1.0 and success, obs  # evaluated: what the API calls did


def test_agent_code_reaches_the_apps_only_through_their_apis(envs):
    env = envs["sandboxed"]
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task("notebyname")["id"]})
    control = adapter.server.control_socket
    assert control is not None and control.is_socket() and adapter.server.apps.alive()
    code = ("print(apis.supervisor.show_profile()['first_name'])\n"
            "def attempt(call, *args, **kwargs):\n"
            "    try:\n"
            "        return call(*args, **kwargs)\n"
            "    except Exception as e:\n"
            "        return 'refused ' + str(e).replace(chr(10), ' ')\n"
            "print('dbs', attempt(requester.post, '/dbs', data={'from_db_home_path': '/', 'to_db_home_path': '/'}))\n"
            "print('clock', attempt(requester.get, '/date_time'))\n"
            "so = __import__('soc' + 'ket')\n"
            "s = so.socket(so.AF_UNIX)\n"
            "try:\n"
            f"    s.connect({str(control)!r})\n"
            "    print('control reachable')\n"
            "except OSError as e:\n"
            "    print('no control:', type(e).__name__)\n")
    obs = env.step(adapter.grammar.render(code))[0]
    lines = obs.strip().splitlines()
    assert lines[0] == "Ada", obs  # the APIs answer over the apps' socket
    for line, route in zip(lines[1:3], ("dbs", "clock")):  # AppWorld's state routes do not
        assert line.startswith(f"{route} refused") and "404" in line and "No app named" in line, obs
    assert lines[3] == "no control: FileNotFoundError", obs  # the control socket is not in the shell's view


def test_the_end_state_carries_only_the_databases_the_episode_changed(envs):
    """The evaluator is sent the changed apps' images; the others it copies from the start
    state it loaded. An episode that changes nothing sends no image and fails evaluation, also
    right after the same task was solved (no end state carries over)."""
    env = envs["sandboxed"]
    adapter = env.unwrapped.adapter
    task_id = task("notebyname")["id"]

    def end_state() -> tuple[dict, bytes]:
        with adapter.server.http_client(timeout_s=30, control=True) as client:
            body = client.get("/end_state", params={"task_id": task_id}).raise_for_status().content
        head, _, images = body.partition(b"\n")
        return json.loads(head), images

    env.reset(options={"task_id": task_id})
    head, images = end_state()
    assert head["sizes"] == {} and images == b"" and "simple_note" in head["unchanged"], head
    assert set(head["unchanged"]) >= {"admin", "supervisor", "simple_note"}
    _, reward, terminated, _, info = env.step(adapter.grammar.render("apis.supervisor.complete_task()"))
    assert terminated and reward == 0.0 and not info["outcome"].success, info  # evaluated: the start state fails

    env.reset(options={"task_id": task_id})
    plan = rubricgym.get_spec("AppWorld-Rubric-v0").load_expert()(adapter)
    for action in plan[:-1]:
        env.step(adapter.grammar.render(action))
    head, images = end_state()
    assert "simple_note" in head["sizes"] and "simple_note" not in head["unchanged"], head
    assert sum(head["sizes"].values()) == len(images) and head["unchanged"], head
    with sqlite3.connect(":memory:") as db:  # a sent image is a database: the notes are there
        offset = sum(size for app, size in head["sizes"].items() if app < "simple_note")
        db.deserialize(images[offset:offset + head["sizes"]["simple_note"]])
        assert db.execute("SELECT COUNT(*) FROM notes").fetchone()[0] > 0
    _, reward, terminated, _, info = env.step(adapter.grammar.render(plan[-1]))
    assert terminated and reward == 1.0 and info["outcome"].success, info

    env.reset(options={"task_id": task_id})  # the solved episode's end state is not this one's
    _, reward, terminated, _, info = env.step(adapter.grammar.render("apis.supervisor.complete_task()"))
    assert terminated and reward == 0.0 and not info["outcome"].success, info


@pytest.mark.parametrize("head", [
    {"sizes": {"simple_note": 10}, "unchanged": ["admin"]},  # an app of the task missing
    {"sizes": {"simple_note": 10}, "unchanged": ["admin", "supervisor", "spotify"]},  # one it does not have
    {"sizes": {"simple_note": 10}, "unchanged": ["admin", "supervisor", "simple_note"]},  # sent and unchanged
    {"sizes": {"simple_note": 10}},  # no unchanged list
    {"sizes": {"simple_note": 10}, "unchanged": "admin,supervisor"},
])
def test_an_end_state_that_does_not_cover_the_tasks_apps_exactly_is_refused(head):
    evaluate_app = runpy.run_path(str(Path(rubricgym.adapters.appworld.__file__).with_name("evaluate_app.py")))
    task_apps = ["simple_note", "admin", "supervisor"]
    assert evaluate_app["end_state_apps"]({"sizes": {"simple_note": 10}, "unchanged": ["admin", "supervisor"]},
                                          task_apps) == ({"simple_note": 10}, {"admin", "supervisor"})
    with pytest.raises(RuntimeError, match="end state"):
        evaluate_app["end_state_apps"](head, task_apps)


def test_an_end_state_that_fails_halfway_through_its_build_is_not_kept():
    """A build that fails on one app (here: one the start state lacks) leaves no end databases
    and no task marked prepared, so the evaluation builds them afresh instead of evaluating half."""
    task_id = task("notebyname")["id"]
    script = f"""
import runpy
from appworld import update_root
update_root({str(offline_data_root())!r})
evaluate_app = runpy.run_path({str(Path(rubricgym.adapters.appworld.__file__).with_name("evaluate_app.py"))!r})
from appworld.apps.model_lib import CachedDBHandler, get_db_home_path
starts, ends = evaluate_app["StartStates"](), evaluate_app["EndStates"]()
apps = evaluate_app["prepare"]({task_id!r}, starts, ends)
end_home = get_db_home_path(storage_type="memory", type="task_output", task_id={task_id!r}) + "/"
print("built", ends.task_id, sum(end_home in key for key in CachedDBHandler.cache) == len(apps))
try:
    ends.build({task_id!r}, [*apps, "no_such_app"])
except RuntimeError as exc:
    print("refused", "no_such_app" in str(exc))
print("kept", ends.task_id, sum(end_home in key for key in CachedDBHandler.cache))
"""
    done = subprocess.run([str(appworld_python()), "-c", script], capture_output=True, text=True, timeout=300,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-3:] == [f"built {task_id} True", "refused True", "kept None 0"], done.stdout
