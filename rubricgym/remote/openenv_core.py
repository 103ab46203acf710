"""OpenEnv's core, loaded without the Gradio web playground nobody here asked for.

Importing anything from ``openenv.core`` imports its whole ``env_server`` package, and that
imports Gradio (seconds of start-up in every server, client and test process) for the
``/web`` playground, which ``create_app`` mounts only when ``ENABLE_WEB_INTERFACE`` is set.
rubricgym serves and plays envs over the WebSocket, so unless that variable asks for the
playground, Gradio is held out while OpenEnv loads: OpenEnv treats a missing Gradio as "no web
interface" (``openenv.core.env_server.create_web_interface_app`` is then None). The hold is
lifted at once: a later ``import gradio`` (or ``create_app`` with the variable set, which
imports the playground itself) still works.
"""

from __future__ import annotations

import os
import sys

__all__ = ["web_interface_wanted"]


def web_interface_wanted() -> bool:
    """Whether OpenEnv's ``create_app`` will mount the Gradio playground (its own test)."""
    return os.getenv("ENABLE_WEB_INTERFACE", "false").lower() in ("true", "1", "yes")


_HOLD = "openenv.core" not in sys.modules and "gradio" not in sys.modules and not web_interface_wanted()
if _HOLD:
    sys.modules["gradio"] = None  # type: ignore[assignment]  # `import gradio` now raises ModuleNotFoundError
try:
    import openenv.core  # noqa: F401  (loads env_server once, without the playground)
finally:
    if _HOLD and "gradio" in sys.modules and sys.modules["gradio"] is None:
        del sys.modules["gradio"]
