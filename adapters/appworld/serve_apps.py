"""AppWorld's apps and the world's databases, in a process of their own (executed by AppWorld's
venv python, in the sandbox of ``sandbox.apps_sandbox``).

    <appworld venv>/bin/python serve_apps.py --apis-uds PATH --control-uds PATH --root <data root>

Two Unix sockets, one process (the databases live in memory here):

* ``--apis-uds``: the app APIs (``/<app>/...``) of the open world's apps and nothing else,
  the code shell's ``remote_apis_url`` (see ``apis_client.py``). AppWorld's own API server
  also answers ``/dbs``, ``/date_time``, ``/seed`` there, which would let agent code load
  other databases or move the clock: those stay off this socket.
* ``--control-uds``: rubricgym's, not bound into the code shell's sandbox. ``POST /open``
  loads a task's start state (what a local ``AppWorld`` does at initialization: its
  databases in memory, the clock frozen at the task's time, the random seed);
  ``GET /end_state`` hands the evaluator the world's databases that changed since ``/open``
  (SQLite images, in memory) and every app's model hashes: one JSON line (task, hashes, each
  sent image's size, the apps left as they started), then the images back to back (no base64).
  An episode changes one or two apps' databases of a world's 2.8 MB; the evaluator has the
  start state of the others already.

Requests on both sockets are served one at a time (one world, one set of connections).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import Any

MANDATORY_APPS = ("admin", "supervisor")


class World:
    """The open world: its task, the apps the agent may call, the clock's freezer."""

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.apps: frozenset[str] = frozenset()
        self.home = ""
        self.freezer: Any = None
        self.start_images: dict[str, bytes] = {}
        self.lock = asyncio.Lock()

    def close(self) -> None:
        from appworld.apps.api_lib import clear_local_dbs_cache, unset_local_date_and_time  # AppWorld's venv

        if self.freezer is not None:
            unset_local_date_and_time(self.freezer)
        clear_local_dbs_cache()
        self.task_id, self.apps, self.freezer, self.start_images = None, frozenset(), None, {}

    def open(self, task_id: str) -> list[str]:
        """The task's start state, as ``AppWorld.__init__`` prepares it locally (without ground truth)."""
        from appworld.apps.api_lib import (  # AppWorld's venv: this script runs there
            set_local_date_and_time,
            set_local_dbs,
            set_local_random_seed,
            set_local_show_api_response_schemas,
        )
        from appworld.apps.model_lib import get_db_home_path  # AppWorld's venv: this script runs there
        from appworld.collections.models import ModelCollection  # AppWorld's venv: this script runs there
        from appworld.environment import AppWorld  # AppWorld's venv: this script runs there
        from appworld.task import Task  # AppWorld's venv: this script runs there

        self.close()
        defaults = AppWorld.init_defaults
        task = Task.load(task_id=task_id, load_ground_truth=False,
                         include_api_response_schemas=defaults.show_api_response_schemas)
        apps = list(dict.fromkeys([*task.allowed_apps, *MANDATORY_APPS]))
        home = get_db_home_path(storage_type="memory", type="task_output", task_id=task_id)
        ModelCollection.load(to_db_home_path=home, from_db_home_path=task.models_from_db_home_path,
                             load_apps=task.allowed_apps)  # also loads the model hashes evaluation diffs by
        set_local_dbs(home, task.models_from_db_home_path, apps)
        self.freezer = set_local_date_and_time(task.datetime)
        set_local_random_seed(defaults.random_seed)
        set_local_show_api_response_schemas(defaults.show_api_response_schemas)
        self.task_id, self.apps, self.home = task_id, frozenset(apps), home
        self.start_images = self.images()
        return apps

    def images(self) -> dict[str, bytes]:
        """Each app's database as a SQLite image (a copy of its pages: ~1 ms a world)."""
        from appworld.common.utils import import_models_module  # AppWorld's venv: this script runs there

        return {app: import_models_module(app).SQLModel.db.connection.serialize() for app in sorted(self.apps)}

    def end_state(self) -> bytes:
        """A JSON line (task, the model hashes AppWorld saves with its databases, each changed
        image's size, the unchanged apps), then each changed app's database as a SQLite image.
        Unchanged means byte for byte the image ``open`` took: a write that changed any row
        changed a page, so no change passes for none."""
        from appworld.apps.model_lib import ModelHashHandler  # AppWorld's venv: this script runs there

        images = self.images()
        changed = {app: image for app, image in images.items() if image != self.start_images.get(app)}
        hashes = {app: dict(models) for app, models in ModelHashHandler.data[self.home].items()}
        head = {"task_id": self.task_id, "model_hashes": hashes, "sizes": {app: len(b) for app, b in changed.items()},
                "unchanged": sorted(set(images) - set(changed))}
        return b"".join([json.dumps(head).encode(), b"\n", *changed.values()])


def apis_app(world: World) -> Any:
    """AppWorld's main app with its app mounts only, gated to the open world's apps, one request at a time."""
    from fastapi.responses import ORJSONResponse  # AppWorld's venv: this script runs there
    from starlette.routing import Mount  # AppWorld's venv: this script runs there

    from appworld.apps import build_main_app, get_all_apps  # AppWorld's venv: this script runs there

    app = build_main_app(get_all_apps())
    app.router.routes = [route for route in app.router.routes if isinstance(route, Mount)]

    async def gated(scope, receive, send) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        name = scope["path"].lstrip("/").split("/", 1)[0]
        if name not in world.apps:  # AppWorld's answer for an app the task does not load
            response = ORJSONResponse(status_code=404, content={"message": f"No app named '{name}' found."})
            return await response(scope, receive, send)
        async with world.lock:
            await app(scope, receive, send)

    return gated


def control_app(world: World) -> Any:
    from fastapi import Body, FastAPI, HTTPException  # AppWorld's venv: this script runs there
    from fastapi.responses import ORJSONResponse, Response  # AppWorld's venv: this script runs there

    app = FastAPI(default_response_class=ORJSONResponse)

    @app.get("/")
    async def health() -> dict[str, Any]:
        return {"ok": True, "task_id": world.task_id}

    # async routes: they run on the event loop's thread, where AppWorld's cached file
    # connections were opened (sqlite3 refuses another thread)
    @app.post("/open")
    async def open_world(task_id: str = Body(..., embed=True)) -> dict[str, Any]:
        async with world.lock:
            return {"output": {"apps": world.open(task_id)}}

    @app.get("/end_state")
    async def end_state(task_id: str):  # (a local name in the annotation would not resolve)
        async with world.lock:
            if world.task_id != task_id:
                raise HTTPException(409, f"the open world is {world.task_id!r}, not {task_id!r}")
            return Response(world.end_state(), media_type="application/octet-stream")

    return app


class QuietServer:
    """A uvicorn server that leaves SIGTERM alone (two share this process; see ``main``)."""

    @staticmethod
    def make(app: Any, uds: str, log_level: str) -> Any:
        import uvicorn  # AppWorld's venv: this script runs there

        class Server(uvicorn.Server):
            def install_signal_handlers(self) -> None:
                pass

        return Server(uvicorn.Config(app, uds=uds, log_level=log_level, access_log=False, lifespan="off"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apis-uds", required=True, help="the app APIs, for the code shell")
    parser.add_argument("--control-uds", required=True, help="world control and end state, for rubricgym")
    parser.add_argument("--root", required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    # nothing here outlives the process: SIGTERM ends it at once (AppWorld's teardown can take 10-35 s)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    from model_checks import install as install_model_checks  # next to this script (bound into its sandbox)

    install_model_checks()  # before AppWorld builds its routes: see model_checks.py

    from appworld import update_root  # AppWorld's venv: this script runs there

    update_root(args.root)
    world = World()
    servers = [QuietServer.make(apis_app(world), args.apis_uds, args.log_level),
               QuietServer.make(control_app(world), args.control_uds, args.log_level)]
    import gc  # AppWorld's venv: the same collector settings as serve_app.py (its long-lived heap)
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)

    async def serve() -> None:
        await asyncio.gather(*(server.serve() for server in servers))

    asyncio.run(serve())
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
