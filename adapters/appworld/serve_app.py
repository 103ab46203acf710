"""Run AppWorld's own environment server on 127.0.0.1 (executed by AppWorld's venv python).

    <appworld venv>/bin/python serve_app.py --port 8123 --root <data root>

``appworld serve environment`` binds 0.0.0.0; this serves the same FastAPI app on loopback
only. It also narrows AppWorld's read-only ``open`` during code execution so that agent
code cannot read the task's ground truth or any file under the data root.
"""

from __future__ import annotations

import argparse
import os
import sys


def guard_data_root(root: str) -> None:
    """Wrap SafetyGuard.enable: agent code may not open files under the data root."""
    import builtins
    import io
    import pathlib

    from appworld.common.safety_guard import SafetyGuard

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()

    import uvicorn
    from appworld import update_root

    update_root(args.root)
    guard_data_root(args.root)
    from appworld.serve.environment import app

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level, access_log=False)
    # uvicorn returned after a graceful SIGTERM; interpreter teardown after a world has run
    # can block for 10-35 s (AppWorld's own CLI exits the same way).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
