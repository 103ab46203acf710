"""AppWorld's evaluator as a long-lived process (executed by AppWorld's venv python, in its own
sandbox that sees the ground truth and never runs agent code).

    <appworld venv>/bin/python evaluate_app.py --root <data root> --apps-socket PATH

Reads one JSON request per line on stdin, ``{"task_id": ..., "experiment_name": ...}``, and
answers one JSON line on stdout: AppWorld's test report (``TestTracker.to_dict``), or
``{"error": "..."}``. ``{"prepare": task_id}`` (sent at reset, no answer) loads the task's
start state ahead, while the episode plays: in-process, AppWorld loads it at initialization.
The end state is read from the apps' process (``GET /end_state`` on its control socket: SQLite
images of the databases the episode changed) and put into AppWorld's database cache as the
in-memory databases ``evaluate_task`` evaluates, the unchanged ones copied from the start
state; only the model hashes are written, to ``experiments/outputs/<experiment>/tasks/<task>/dbs``,
an in-memory folder of this sandbox removed after each evaluation.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sqlite3
import sys
import traceback
from collections import OrderedDict

MAX_REQUEST_CHARS = 4096
MAX_END_STATE_BYTES = 512 * 1024 * 1024
END_STATE_TIMEOUT_S = 60.0
START_STATES_KEPT = 8


class StartStates:
    """The in-memory start states of the last ``kept`` tasks evaluated stay loaded (a group of
    rollouts evaluates one task many times; loading costs ~20 ms); older ones are dropped."""

    def __init__(self, kept: int = START_STATES_KEPT) -> None:
        self.kept = kept
        self.order: OrderedDict[str, None] = OrderedDict()
        self.apps: dict[str, list[str]] = {}  # a loaded start state's apps, by task

    def used(self, task_id: str) -> None:
        self.order[task_id] = None
        self.order.move_to_end(task_id)
        while len(self.order) > self.kept:
            dropped = self.order.popitem(last=False)[0]
            self.apps.pop(dropped, None)
            forget_memory_state("task_input", dropped)


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


def end_state_apps(head: dict, task_apps: list[str]) -> tuple[dict[str, int], set[str]]:
    """The sent images' sizes and the unchanged apps, checked to cover the task's apps exactly."""
    sizes, unchanged = head["sizes"], head.get("unchanged")
    if not isinstance(unchanged, list) or not all(isinstance(app, str) for app in unchanged):
        raise RuntimeError("the apps' end state names its unchanged apps wrongly")
    if set(sizes) & set(unchanged) or set(sizes) | set(unchanged) != set(task_apps):
        raise RuntimeError(f"the apps' end state covers {sorted(set(sizes) | set(unchanged))}, "
                           f"not the task's apps {sorted(task_apps)}")
    return sizes, set(unchanged)


class EndStates:
    """The in-memory databases ``evaluate_task`` evaluates as a task's end state, put where
    AppWorld's ``set_db`` finds them loaded (its database cache), so evaluation reads no files.
    ``build`` makes them copies of the start state - the end state of every app an episode
    leaves alone - at ``prepare``, while the episode plays; an evaluation then overwrites only
    the apps the episode changed, from their images. One task's at a time."""

    def __init__(self) -> None:
        self.task_id: str | None = None  # whose end databases are built (and not yet evaluated)

    def build(self, task_id: str, apps: list[str]) -> None:
        from appworld.apps.model_lib import (  # AppWorld's venv: this script runs there
            CachedDBHandler,
            DBChangesTracker,
            db_home_to_app_path,
            get_db_engine,
            get_db_home_path,
        )

        self.forget()
        forget_memory_state("task_output", task_id)
        start_home = get_db_home_path(storage_type="memory", type="task_input", task_id=task_id)
        end_home = get_db_home_path(storage_type="memory", type="task_output", task_id=task_id)
        try:
            for app in apps:
                start = CachedDBHandler.get(db_home_to_app_path(start_home, app))
                if start is None:
                    raise RuntimeError(f"the start state of {task_id!r} has no {app!r} database")
                path = db_home_to_app_path(end_home, app)
                engine = get_db_engine(path)
                start[0].raw_connection().connection.backup(engine.raw_connection().connection)
                tracker = DBChangesTracker(engine)
                tracker.restart()
                CachedDBHandler.set(path, engine, tracker)
        except BaseException:  # half an end state is none: the evaluation builds it again
            forget_memory_state("task_output", task_id)
            raise
        self.task_id = task_id

    def load(self, task_id: str, head: dict, images: memoryview, apps: list[str], dbs_dir: str) -> None:
        """The changed apps' images over their start copies; the model hashes into ``dbs_dir``
        (``model_hashes.json``, the one file AppWorld reads there)."""
        from appworld.apps.model_lib import (  # AppWorld's venv: this script runs there
            CachedDBHandler,
            db_home_to_app_path,
            get_db_home_path,
        )

        sizes, _ = end_state_apps(head, apps)
        if self.task_id != task_id:  # not prepared (the process's first evaluation)
            self.build(task_id, apps)
        end_home = get_db_home_path(storage_type="memory", type="task_output", task_id=task_id)
        offset = 0
        for app, size in sizes.items():
            image = sqlite3.connect(":memory:")
            try:
                image.deserialize(images[offset:offset + size])
                image.backup(CachedDBHandler.get(db_home_to_app_path(end_home, app))[0].raw_connection().connection)
            finally:
                image.close()
            offset += size
        shutil.rmtree(dbs_dir, ignore_errors=True)
        os.makedirs(dbs_dir)
        with open(os.path.join(dbs_dir, "model_hashes.json"), "w") as fh:
            json.dump(head.get("model_hashes") or {}, fh)

    def forget(self) -> None:
        """The next episode of the task must be evaluated on its own end state, not this one."""
        if self.task_id is not None:
            forget_memory_state("task_output", self.task_id)
            self.task_id = None


def prepare(task_id: str, starts: StartStates, ends: EndStates) -> list[str]:
    """The task's start state into memory (kept by ``starts``) and its end databases built as
    copies of it, before its evaluation; the task's apps."""
    from appworld.task import Task  # AppWorld's venv: this script runs there

    apps = starts.apps.get(task_id) or list(Task.load(task_id=task_id).model_collection.app_names)
    starts.apps[task_id] = apps
    starts.used(task_id)
    ends.build(task_id, apps)
    return apps


def evaluate(task_id: str, experiment_name: str, starts: StartStates, ends: EndStates, apps_socket: str) -> dict:
    from appworld.common.path_store import path_store  # AppWorld's venv: this script runs there
    from appworld.evaluator import evaluate_task  # AppWorld's venv: this script runs there

    dbs_dir = os.path.join(path_store.experiment_outputs, experiment_name, "tasks", task_id, "dbs")
    try:
        apps = starts.apps[task_id] if ends.task_id == task_id else prepare(task_id, starts, ends)
        ends.load(task_id, *fetch_end_state(apps_socket, task_id), apps, dbs_dir)
        tracker = evaluate_task(task_id=task_id, experiment_name=experiment_name, suppress_errors=True,
                                save_report=False)
        return tracker.to_dict(stats_only=False)
    finally:
        ends.forget()
        starts.used(task_id)
        shutil.rmtree(os.path.join(path_store.experiment_outputs, experiment_name), ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--apps-socket", required=True, help="the apps' control socket (the end state)")
    args = parser.parse_args()
    from model_checks import install as install_model_checks  # next to this script (bound into its sandbox)

    install_model_checks()  # before AppWorld builds its routes: see model_checks.py

    from appworld import update_root  # AppWorld's venv: this script runs there

    update_root(args.root)
    import appworld.evaluator  # noqa: F401  (imported before the first request: it takes seconds)
    import gc  # AppWorld's venv: the same collector settings as serve_app.py, whose evaluation this mirrors

    gc.freeze()  # an evaluation builds thousands of model objects; a full collection rescanning
    gc.set_threshold(100_000, 50, 100)  # AppWorld's imported heap cost up to 0.2 s inside one
    starts, ends = StartStates(), EndStates()

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
                    prepare(str(request["prepare"]), starts, ends)
                except Exception:  # the evaluation loads it again and reports what fails
                    traceback.print_exc()
                continue
            answer = {"output": evaluate(str(request["task_id"]), str(request["experiment_name"]), starts, ends,
                                         args.apps_socket)}
        except Exception as exc:  # one bad evaluation is an answer, never the end of the process
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
        print(json.dumps(answer, default=str), file=out, flush=True)


if __name__ == "__main__":
    main()
