"""AppWorld on its own engine, out of process: ``gym.make("AppWorld-Rubric-v0")``.

AppWorld (pydantic<2) lives in its own venv (``.venvs/appworld``) and is reached over HTTP
through its own environment server on 127.0.0.1; agent code runs only in that process.
"""

from rubricgym.adapters.appworld.adapter import AppWorldAdapter
from rubricgym.adapters.appworld.facts import ApiCall, AppWorldBinding, AppWorldFacts
from rubricgym.adapters.appworld.paths import AppWorldNotSetUp

__all__ = ["AppWorldAdapter", "AppWorldFacts", "AppWorldBinding", "ApiCall", "AppWorldNotSetUp"]
