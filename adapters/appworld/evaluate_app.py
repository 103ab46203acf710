"""AppWorld's evaluator as a long-lived process (executed by AppWorld's venv python, in its own
sandbox that sees the ground truth and never runs agent code).

    <appworld venv>/bin/python evaluate_app.py --root <data root> --apps-socket PATH

Reads one JSON request per line on stdin, ``{"task_id": ..., "experiment_name": ...}``, and
answers one JSON line on stdout: AppWorld's test report (``TestTracker.to_dict``), or
``{"error": "..."}``. ``{"prepare": task_id}`` (sent at reset, no answer) loads the task's
start state ahead, while the episode plays: in-process, AppWorld loads it at initialization. The end state is read from the apps' process (``GET /end_state`` on its
control socket: SQLite images of the world's databases) and laid out where AppWorld's
``evaluate_task`` reads it, ``experiments/outputs/<experiment>/tasks/<task>/dbs``, an
in-memory folder of this sandbox; it is removed after each evaluation.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import traceback
from collections import OrderedDict

MAX_REQUEST_CHARS = 4096
MAX_END_STATE_BYTES = 512 * 1024 * 1024
END_STATE_TIMEOUT_S = 60.0
START_STATES_KEPT = 8


class FileConnections:
    """AppWorld caches one SQLite connection per file path (``lru_cache``): a connection to an
    episode's end state would outlive the file, and the next episode saved at the same path
    would be read through it, stale. This cache forgets the end states' connections after each
    evaluation and keeps the tasks' start states' (reopening those costs ~60 ms an episode)."""

    def __init__(self, outputs_root: str) -> None:
        from appworld.apps import model_lib  # AppWorld's venv: this script runs there

        self.outputs_root = os.path.realpath(outputs_root) + os.sep
        self.connections: dict[str, object] = {}
        self.open = model_lib.get_direct_sqlite3_connection
        model_lib.get_direct_cached_sqlite3_connection = self.get

    def get(self, path: str):
        if path not in self.connections:
            self.connections[path] = self.open(path)
        return self.connections[path]

    def forget_end_states(self) -> None:
        for path in [p for p in self.connections if os.path.realpath(p).startswith(self.outputs_root)]:
            self.connections.pop(path).close()


class StartStates:
    """The in-memory start states of the last ``kept`` tasks evaluated stay loaded (a group of
    rollouts evaluates one task many times; loading costs ~20 ms); older ones are dropped."""

    def __init__(self, kept: int = START_STATES_KEPT) -> None:
        self.kept = kept
        self.order: OrderedDict[str, None] = OrderedDict()

    def used(self, task_id: str) -> None:
        self.order[task_id] = None
        self.order.move_to_end(task_id)
        while len(self.order) > self.kept:
            forget_memory_state("task_input", self.order.popitem(last=False)[0])


def forget_memory_state(kind: str, task_id: str) -> None:
    from appworld.apps.model_lib import CachedDBHandler, get_db_home_path  # AppWorld's venv

    # keys are "<home>/<app>.db"; the trailing "/" keeps task "a_1" from matching "a_10"
    CachedDBHandler.reset(get_db_home_path(storage_type="memory", type=kind, task_id=task_id) + "/")


@functools.cache
def apps_client(apps_socket: str):
    """One client for the process's life (building one costs an SSL context, ~15 ms)."""
    import httpx  # AppWorld's venv: this script runs there

    return httpx.Client(transport=httpx.HTTPTransport(uds=apps_socket), timeout=END_STATE_TIMEOUT_S, trust_env=False)


def fetch_end_state(apps_socket: str, task_id: str) -> tuple[dict, memoryview]:
    """The open world's head (model hashes, image sizes) and its databases' images, from the
    apps' control socket (bounded)."""
    with apps_client(apps_socket).stream("GET", "http://apps/end_state", params={"task_id": task_id}) as response:
        body = bytearray()
        for chunk in response.iter_raw(1 << 20):
            body += chunk
            if len(body) > MAX_END_STATE_BYTES:
                raise ValueError(f"the apps' end state is over {MAX_END_STATE_BYTES} bytes")
    if response.status_code != 200:
        raise RuntimeError(f"the apps' end state: {response.status_code} {bytes(body[:300])!r}")
    end = body.find(b"\n")
    head = json.loads(body[:end]) if end > 0 else None
    if not isinstance(head, dict) or head.get("task_id") != task_id or not isinstance(head.get("sizes"), dict):
        raise RuntimeError(f"the apps answered another end state than {task_id!r}'s")
    sizes = head["sizes"].values()
    if not all(isinstance(n, int) and n >= 0 for n in sizes) or sum(sizes) != len(body) - end - 1:
        raise RuntimeError("the apps' end state does not add up to its images' sizes")
    return head, memoryview(body)[end + 1:]


def lay_out_end_state(head: dict, images: memoryview, dbs_dir: str) -> None:
    """The files AppWorld's ``save_local_dbs(format="full", save_model_hashes=True)`` writes."""
    from appworld.apps.model_lib import db_home_to_app_path  # AppWorld's venv: this script runs there

    shutil.rmtree(dbs_dir, ignore_errors=True)
    os.makedirs(dbs_dir)
    with open(os.path.join(dbs_dir, "model_hashes.json"), "w") as fh:
        json.dump(head.get("model_hashes") or {}, fh)
    offset = 0
    for app_name, size in head["sizes"].items():
        if not isinstance(app_name, str) or not app_name.isidentifier():
            raise ValueError(f"an app name that is not one: {app_name!r}")
        with open(db_home_to_app_path(dbs_dir, app_name, format="full"), "wb") as fh:
            fh.write(images[offset:offset + size])
        offset += size


def prepare(task_id: str, starts: StartStates) -> None:
    """The task's start state into memory (kept by ``starts``), before its evaluation."""
    from appworld.task import Task  # AppWorld's venv: this script runs there

    Task.load(task_id=task_id).model_collection  # noqa: B018  (the property loads it)
    starts.used(task_id)


def evaluate(task_id: str, experiment_name: str, connections: FileConnections, starts: StartStates,
             apps_socket: str) -> dict:
    from appworld.common.path_store import path_store  # AppWorld's venv: this script runs there
    from appworld.evaluator import evaluate_task  # AppWorld's venv: this script runs there

    dbs_dir = os.path.join(path_store.experiment_outputs, experiment_name, "tasks", task_id, "dbs")
    try:
        lay_out_end_state(*fetch_end_state(apps_socket, task_id), dbs_dir)
        tracker = evaluate_task(task_id=task_id, experiment_name=experiment_name, suppress_errors=True,
                                save_report=False)
        return tracker.to_dict(stats_only=False)
    finally:  # the next episode of the same task must load its own end state, not this one:
        forget_memory_state("task_output", task_id)  # the in-memory copy
        connections.forget_end_states()  # and the connection to the file it was read from
        starts.used(task_id)
        shutil.rmtree(os.path.join(path_store.experiment_outputs, experiment_name), ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--apps-socket", required=True, help="the apps' control socket (the end state)")
    args = parser.parse_args()
    from appworld import update_root  # AppWorld's venv: this script runs there

    update_root(args.root)
    import appworld.evaluator  # noqa: F401  (imported before the first request: it takes seconds)
    from appworld.common.path_store import path_store  # AppWorld's venv: this script runs there

    connections, starts = FileConnections(path_store.experiment_outputs), StartStates()

    out = sys.stdout
    sys.stdout = sys.stderr  # AppWorld prints: keep the answer channel to JSON lines
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        try:
            if len(line) > MAX_REQUEST_CHARS:
                raise ValueError("request too long")
            request = json.loads(line)
            if "prepare" in request:
                try:
                    prepare(str(request["prepare"]), starts)
                except Exception:  # the evaluation loads it again and reports what fails
                    traceback.print_exc()
                continue
            answer = {"output": evaluate(str(request["task_id"]), str(request["experiment_name"]), connections,
                                         starts, args.apps_socket)}
        except Exception as exc:  # one bad evaluation is an answer, never the end of the process
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
        print(json.dumps(answer, default=str), file=out, flush=True)


if __name__ == "__main__":
    main()
