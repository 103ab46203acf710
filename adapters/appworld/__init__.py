"""AppWorld on its own engine, out of process: ``gym.make("AppWorld-Rubric-v0")``.

AppWorld (pydantic<2) lives in its own venv (``.venvs/appworld``) and is reached over HTTP
through its own environment server on 127.0.0.1; agent code runs only in that process.
Layout: ``facts.py`` (facts and binding models), ``binder.py`` (``bind_task``),
``observe.py`` (all facts, from engine output), ``adapter.py`` (engine driving),
``engine.py`` (the server process and its client), ``generate.py`` (the offline task set's
generator, run by AppWorld's python), ``expert.py`` (``spec.expert``), ``spec.py``.
"""

from rubricgym.adapters.appworld.adapter import AppWorldAdapter
from rubricgym.adapters.appworld.facts import AppWorldBinding, AppWorldFacts, CodeCallSite, ExecutedCall
from rubricgym.adapters.appworld.paths import AppWorldNotSetUp

__all__ = ["AppWorldAdapter", "AppWorldFacts", "AppWorldBinding", "ExecutedCall", "CodeCallSite", "AppWorldNotSetUp"]
