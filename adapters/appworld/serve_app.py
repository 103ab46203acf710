"""Run AppWorld's own environment server on 127.0.0.1 (executed by AppWorld's venv python).

    <appworld venv>/bin/python serve_app.py (--port 8123 | --uds PATH) --root <data root> [--cpu-s 10]
        [--apis-uds PATH]

``appworld serve environment`` binds 0.0.0.0; this serves the same FastAPI app on loopback
only (or on a Unix socket, the channel out of the sandbox, see sandbox.py). With
``--apis-uds`` it is only the code shell: worlds it opens call the apps in another process
over that socket (``remote_apis_url``, see apis_client.py and serve_apps.py), so no database
of the world lives where agent code runs. It adds three things AppWorld's server does not have:

* agent code may not open files under the data root (no reading the ground truth);
* ``POST /execute_tracked``: AppWorld's ``/execute`` plus the requests that execution made,
  read from AppWorld's own ``requester.request_tracker`` (the list it saves as
  ``logs/api_calls.jsonl``), each annotated with app, API, HTTP status and response size;
* a CPU-time budget per execution (``ITIMER_PROF``): agent code past it is stopped with a
  ``CPUTimeLimitError`` error, reported like any other execution failure. The memory cap
  is an address-space limit set by the launcher before this process starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

CPU_LIMIT_MESSAGE = "this execution used more than {cpu_s:g} s of CPU time"
MEMORY_LIMIT_MESSAGE = "MemoryError: this execution hit the server's memory cap"


class CPUTimeLimitError(Exception):
    """Raised in agent code when one execution exhausts its CPU-time budget."""


def guard_data_root(root: str) -> None:
    """Wrap SafetyGuard.enable: agent code may not open files under the data root."""
    import builtins  # AppWorld's venv: this script runs there
    import io  # AppWorld's venv: this script runs there
    import pathlib  # AppWorld's venv: this script runs there

    from appworld.common.safety_guard import SafetyGuard  # AppWorld's venv: this script runs there

    protected = os.path.realpath(root) + os.sep
    original_enable = SafetyGuard.enable

    def refuse_protected(opener):
        def guarded(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)):
                path = os.path.realpath(os.fsdecode(file))
                if (path + os.sep).startswith(protected):
                    raise PermissionError("Reading AppWorld's data files is disabled.")
            return opener(file, *args, **kwargs)

        return guarded

    def enable(self) -> None:
        original_enable(self)
        builtins.open = io.open = refuse_protected(builtins.open)
        path_open = pathlib.Path.open

        def guarded_path_open(path_self, *args, **kwargs):
            refuse_protected(lambda *a, **k: None)(str(path_self))
            return path_open(path_self, *args, **kwargs)

        pathlib.Path.open = guarded_path_open

    SafetyGuard.enable = enable


def annotate_requests() -> None:
    """Record, next to each entry of AppWorld's request tracker, the app/API it served and
    the response's status and size (the tracker itself keeps method, url and data only)."""
    from appworld.requester import Requester  # AppWorld's venv: this script runs there

    def notes(requester: Any) -> dict[int, dict[str, Any]]:
        found = requester.__dict__.get("_rubricgym_notes")
        if found is None or requester.__dict__.get("_rubricgym_tracker") is not requester.request_tracker.requests:
            found = requester.__dict__["_rubricgym_notes"] = {}
            requester.__dict__["_rubricgym_tracker"] = requester.request_tracker.requests
        return found

    def wrap_transport(name: str) -> None:
        original = getattr(Requester, name)

        def tracked(self, url, *args, **kwargs):
            index = len(self.request_tracker.requests)
            try:
                response = original(self, url, *args, **kwargs)
            except Exception as exc:  # raise_on_failure: "Response status code is 409:\n<body>"
                if len(self.request_tracker.requests) == index + 1:
                    text = str(exc)
                    head, _, body = text.partition("\n")
                    code = head.rsplit(" ", 1)[-1].rstrip(":")
                    notes(self).setdefault(index, {}).update(
                        status=int(code) if head.startswith("Response status code is") and code.isdigit() else None,
                        response_bytes=len(body), error=type(exc).__name__)
                raise
            if len(self.request_tracker.requests) == index + 1:
                body = getattr(response, "content", None)
                size = len(body) if isinstance(body, (bytes, bytearray)) else len(str(getattr(response, "text", "")))
                notes(self).setdefault(index, {}).update(status=int(response.status_code), response_bytes=size)
            return response

        setattr(Requester, name, tracked)

    for method in ("_get", "_post", "_put", "_patch", "_delete"):
        wrap_transport(method)
    original_request = Requester._request

    def request(self, _app_name, _api_name, *args, **kwargs):
        index = len(self.request_tracker.requests)
        try:
            return original_request(self, _app_name, _api_name, *args, **kwargs)
        finally:
            if len(self.request_tracker.requests) == index + 1:
                notes(self).setdefault(index, {}).update(app=_app_name, api=_api_name)

    Requester._request = request


def new_requests(world: Any) -> list[dict[str, Any]]:
    """Tracker entries added since the last call for this world, with their annotations."""
    from fastapi.encoders import jsonable_encoder  # AppWorld's venv: this script runs there

    requester = world.requester
    entries = requester.request_tracker.requests
    notes = requester.__dict__.get("_rubricgym_notes") or {}
    start = world.__dict__.get("_rubricgym_cursor", 0)
    if start > len(entries):  # the tracker was reset
        start = 0
    world.__dict__["_rubricgym_cursor"] = len(entries)
    out = []
    for index in range(start, len(entries)):
        entry = entries[index]
        out.append({"index": index, "method": entry["method"], "url": entry["url"],
                    "data": jsonable_encoder(entry["data"]), **notes.get(index, {})})
    return out


def budget_cpu(cpu_s: float) -> None:
    """Arm a CPU-time timer around each cell AppWorld runs; past it the cell is stopped."""
    from appworld.environment import AppWorld  # AppWorld's venv: this script runs there

    def over_budget(signum: int, frame: Any) -> None:
        raise CPUTimeLimitError(CPU_LIMIT_MESSAGE.format(cpu_s=cpu_s))

    signal.signal(signal.SIGPROF, over_budget)
    original = AppWorld._shell_run_cell

    def run_cell(self, code: str):
        self.__dict__["_rubricgym_limit"] = None
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        try:
            return original(self, code)
        except CPUTimeLimitError:  # arrived outside the cell's own error handling
            self.__dict__["_rubricgym_limit"] = "cpu"
            return None
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)

    if cpu_s > 0:
        AppWorld._shell_run_cell = run_cell


def add_tracked_execute(app: Any, cpu_s: float) -> None:
    from fastapi import Body  # AppWorld's venv: this script runs there

    import appworld.serve.environment as server  # AppWorld's venv: this script runs there

    @app.post("/execute_tracked")
    async def execute_tracked(task_id: str = Body(...), code: str = Body(...)) -> dict[str, Any]:
        server.maybe_raise_exception(task_id)
        world = server.world
        start_cpu = os.times()
        try:
            output = world.execute(code)
        except MemoryError:
            output = f"Execution failed. Traceback:\n{MEMORY_LIMIT_MESSAGE}"
        end_cpu = os.times()
        limit = world.__dict__.pop("_rubricgym_limit", None)
        if limit == "cpu":
            output = "Execution failed. Traceback:\nCPUTimeLimitError: " + CPU_LIMIT_MESSAGE.format(cpu_s=cpu_s)
        elif "CPUTimeLimitError" in output[-400:]:
            limit = "cpu"
        elif "MemoryError" in output[-400:]:
            limit = "memory"
        used = (end_cpu.user + end_cpu.system) - (start_cpu.user + start_cpu.system)
        return {"output": {"output": output, "requests": new_requests(world), "cpu_s": round(used, 4),
                           "limit": limit}}


def main() -> None:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve on 127.0.0.1:PORT")
    where.add_argument("--uds", help="serve on this Unix socket (the sandbox's one channel out)")
    parser.add_argument("--root", required=True)
    parser.add_argument("--cpu-s", type=float, default=0.0, help="CPU seconds per execution (0: no budget)")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--apis-uds", help="the apps' socket: worlds opened with remote_apis_url call it")
    args = parser.parse_args()
    from model_checks import install as install_model_checks  # next to this script (bound into its sandbox)

    install_model_checks()  # before AppWorld builds its routes: see model_checks.py

    import uvicorn  # AppWorld's venv: this script runs there
    from appworld import update_root  # AppWorld's venv: this script runs there

    update_root(args.root)
    if args.apis_uds:
        from apis_client import use_apis_socket  # next to this script (bound into the sandbox with it)

        use_apis_socket(args.apis_uds)
    guard_data_root(args.root)
    annotate_requests()
    from appworld.serve.environment import app  # AppWorld's venv: this script runs there

    budget_cpu(args.cpu_s)
    add_tracked_execute(app, args.cpu_s)
    # the first world imports every app's API module (seconds of FastAPI route building); do it
    # here, while the apps' process builds the same routes, rather than in the first reset
    from appworld.apps import get_all_apps  # AppWorld's venv: this script runs there
    from appworld.common.utils import import_apis_module  # AppWorld's venv: this script runs there

    for app_name in get_all_apps():
        import_apis_module(app_name)
    # every world builds thousands of model objects: keep the collector from rescanning the
    # server's own long-lived heap (measured: 0.59 -> 0.48 CPU s per offline episode)
    import gc  # AppWorld's venv: this script runs there
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    where = {"uds": args.uds} if args.uds else {"host": "127.0.0.1", "port": args.port}
    uvicorn.run(app, **where, log_level=args.log_level, access_log=False)
    # uvicorn returned after a graceful SIGTERM; interpreter teardown after a world has run
    # can block for 10-35 s (AppWorld's own CLI exits the same way).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
