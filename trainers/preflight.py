"""Checks a command makes before any work starts (all of them under ``--dry-run``): the env's
id and data, the user's agent function, an endpoint's reachability, a model name.

Each failure is a ``SetupError`` whose message says what is wrong, the value given and the fix;
the commands print it as one line and exit 2, so a bad setting never becomes a traceback, a
run of failed episodes or an empty output folder. Nothing here loads torch or a model.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.models import RANDOM_SHAPES, SMOLLM2_ALIASES, TINY_ALIASES
from rubricgym.registration import (
    check_env_id,
    check_installed,
    check_resources,
    get_spec,
    is_client_env_id,
    make_rubric_env,
)

ENDPOINT_TIMEOUT_S = 3.0
"""How long a reachability check waits: a dry run answers within seconds."""
MAKE_OPTIONS = ("reward", "max_steps", "render_mode")
"""``gym.make`` keywords that are the env wrapper's, not the engine adapter's options."""


class SetupError(ValueError):
    """A setting that cannot work: what is wrong, the value given, the fix (one line)."""

    def __init__(self, what: str, value: object, fix: str | None):
        self.what, self.value, self.fix = what, value, fix
        given = "" if value is None else f" (given: {value})"  # None: the value is in ``what`` already
        super().__init__(f"{what}{given}" + ("" if fix is None else f". Fix: {fix}"))  # None: ``what`` names it


def validation_message(exc: ValidationError, name: Callable[[str], str] = str) -> str:
    """pydantic's errors as ``where: what`` joined by '; ' (``name`` turns a field's dotted path
    into what the user typed): no error-page links, and an input shown only when it is a
    number (a string may be a key)."""
    parts = []
    for error in exc.errors(include_url=False):
        where = name(".".join(str(p) for p in error["loc"])) if error["loc"] else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        given = error.get("input")
        shown = f" (given: {given})" if isinstance(given, int | float) and not isinstance(given, bool) else ""
        parts.append(f"{where}: {message}{shown}" if where else message)
    return "; ".join(parts)


def importable_here() -> None:
    """Put the current folder first on ``sys.path``, as ``python -m`` does, so that a
    ``module:function`` in the folder the command runs from imports (spawned workers get this
    ``sys.path`` from their parent)."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)


def _import_module(ref: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        if exc.name in (module_name, top):
            raise SetupError(f"no module {module_name!r} in the current folder ({os.getcwd()}) or on sys.path", ref,
                             f"run from the folder holding {module_name.replace('.', '/')}.py, or install the "
                             "package that provides it") from None
        raise SetupError(f"{module_name} imports {exc.name!r}, which is not installed", ref,
                         f"pip install the package providing {exc.name!r}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed at import: its error, not a traceback
        raise SetupError(f"importing {module_name} failed: {type(exc).__name__}: {exc}", ref,
                         f"fix {module_name} so that `python -c 'import {module_name}'` works") from None


def import_callable(ref: str | None) -> Callable[..., Any]:
    """The user's ``module:function`` agent, imported from the current folder as ``python -m``
    would, and checked to take the chat messages (plus optional ``env_id`` / ``task_id``)."""
    module_name, _, name = str(ref).partition(":")
    if not module_name or not name:
        raise SetupError("--callable must be module:function", ref, "e.g. --callable my_agent:respond "
                         "(my_agent.py in the current folder defines respond(messages))")
    importable_here()
    module = _import_module(str(ref), module_name)
    function = module
    for part in name.split("."):
        if not hasattr(function, part):
            defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
            raise SetupError(f"{module_name} ({getattr(module, '__file__', '?')}) has no {name!r}", ref,
                             f"name one of its functions: {', '.join(defined) or 'it defines none'}")
        function = getattr(function, part)
    check_agent(function, str(ref))
    if is_async(function):
        raise SetupError(f"{ref} is an async function; the command calls its agent synchronously", ref,
                         "define a sync function, or call rubricgym.evaluate(env_id, agent) from Python")
    return function


def is_async(function: Any) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one (an async agent class)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)


def check_agent(function: Any, label: str) -> None:
    """``function`` can be called as the eval calls an agent: ``function(messages)`` plus the
    ``env_id`` / ``task_id`` keywords it names."""
    if not callable(function):
        raise SetupError(f"{label} is not callable", type(function).__name__,
                         "pass a function (or an object with __call__) taking the chat messages")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: called as it is
        return
    extra = {k: "" for k in ("env_id", "task_id") if k in signature.parameters}
    try:
        signature.bind([], **extra)
    except TypeError as exc:
        raise SetupError(f"{label} cannot be called with the chat messages ({exc})", f"{label}{signature}",
                         "define it as respond(messages), optionally with env_id and task_id keywords") from None


def check_env(env_id: str, kwargs: Mapping[str, Any] | None = None) -> str:
    """The env id resolves, its benchmark's modules and resources are installed, and one env
    is made and closed (its adapter checks its data there: a location without data fails now,
    not in every episode). No episode is played. Returns the benchmark's name."""
    env_id = check_env_id(env_id)
    if is_client_env_id(env_id):  # a served env: its server holds the data
        return env_id
    spec = get_spec(env_id)
    options = {k: v for k, v in {**spec.env_id(env_id).kwargs, **(kwargs or {})}.items() if k not in MAKE_OPTIONS}
    check_installed(spec)
    check_resources(spec, options)
    try:
        make_rubric_env(spec.name, reward="none", **options).close()
    except (OSError, ValueError, LookupError, ImportError) as exc:  # the adapter's own message names the fix
        raise SetupError(f"env {env_id} cannot be made: {type(exc).__name__}: {exc}", None, None) from None
    return spec.name


def check_endpoint(url: str, what: str, timeout_s: float = ENDPOINT_TIMEOUT_S) -> None:
    """One GET to ``url``: any HTTP answer (a 404 or 401 included) means a server listens there.
    Refused connections, unknown hosts and silence past ``timeout_s`` are ``SetupError``."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout_s):
            return
    except urllib.error.HTTPError:
        return
    except (TimeoutError, urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SetupError(f"{what} is not reachable ({reason})", url,
                         "start the server (e.g. rubricgym serve-llm) or correct the URL") from None


def check_model_name(name: str, what: str) -> None:
    """A model named as ``rubricgym.models.load_causal_lm`` takes it: a known name (smollm2,
    tiny, a random shape) or an existing folder. Nothing is loaded."""
    known = SMOLLM2_ALIASES | TINY_ALIASES | set(RANDOM_SHAPES)
    if name.lower() in known or Path(name).is_dir():
        return
    raise SetupError(f"{what} is neither a known model name nor a folder", name,
                     f"name one of {', '.join(sorted(known))}, or the folder a transformers model was saved to")
