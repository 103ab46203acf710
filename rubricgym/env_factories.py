"""Named env factories: what ``env.factory`` in a config (or a run folder) may refer to.

A config file is data. A string in it that named a Python object by its import path
(``module:callable``) would let whoever wrote the file run code on ``--resume`` (a
``torch.hub:load`` with a local ``hubconf.py`` is enough). So ``env.factory`` is a *name*,
resolved only through this registry, which two things fill:

- running code, in-process: ``register_env_factory("word", make_word_env)`` (tests and
  scripts that build their own envs);
- installed packages, through the ``rubricgym.env_factories`` entry-point group (the
  package's own metadata, like the benchmark plugins).

Nothing is ever imported from a file's text.

>>> import gymnasium as gym
>>> register_env_factory("doc-cartpole", lambda max_steps=2: gym.make("CartPole-v1"))
>>> env_factory("doc-cartpole")(max_steps=2).spec.id
'CartPole-v1'
>>> env_factory("doc-cartpol")
Traceback (most recent call last):
...
rubricgym.env_factories.UnknownEnvFactory: no env factory 'doc-cartpol' is registered; did you mean doc-cartpole? ...
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from importlib.metadata import entry_points

import gymnasium as gym

__all__ = [
    "ENTRY_POINT_GROUP", "EnvFactory", "FACTORY_NAME", "UnknownEnvFactory", "check_factory_name", "env_factory",
    "env_factory_names", "register_env_factories", "register_env_factory", "registered_env_factories",
]

ENTRY_POINT_GROUP = "rubricgym.env_factories"
FACTORY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
"""A factory name: letters, digits, ``_ . -``; never ``module:callable`` or a path."""

EnvFactory = Callable[..., gym.Env]
_FACTORIES: dict[str, EnvFactory] = {}


class UnknownEnvFactory(LookupError):
    """``env.factory`` names no registered factory."""


def check_factory_name(name: str) -> str:
    """``name`` when it is a factory *name*; ``ValueError`` saying how to register one otherwise."""
    if FACTORY_NAME.fullmatch(name):
        return name
    hint = (" (an import path is not accepted: a config file must not choose code to import)"
            if ":" in name or "/" in name else "")
    raise ValueError(f"env.factory must be a registered factory name (letters, digits, '_', '.', '-'), got {name!r}"
                     f"{hint}; register one with rubricgym.register_env_factory(name, fn) in the running code, or "
                     f"through the {ENTRY_POINT_GROUP!r} entry point of an installed package")


def register_env_factory(name: str, factory: EnvFactory) -> None:
    """Make ``env.factory=name`` build envs with ``factory(max_steps=..., **env.kwargs)``.
    Registering the same name again replaces it (a re-imported test module)."""
    if not callable(factory):
        raise TypeError(f"env factory {name!r} must be callable, got {type(factory).__name__}")
    _FACTORIES[check_factory_name(name)] = factory


def registered_env_factories() -> dict[str, EnvFactory]:
    """The factories this process registered (to hand to a spawned process, which starts with
    an empty registry: ``register_env_factories`` there; the callables travel by reference)."""
    return dict(_FACTORIES)


def register_env_factories(factories: dict[str, EnvFactory]) -> None:
    """``register_env_factory`` for each item (a spawned process's initializer)."""
    for name, factory in factories.items():
        register_env_factory(name, factory)


def _installed() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def env_factory_names() -> list[str]:
    """Every name ``env.factory`` can take here: registered in-process, or by an installed package."""
    return sorted(set(_FACTORIES) | set(_installed()))


def env_factory(name: str) -> EnvFactory:
    """The factory registered as ``name`` (in-process first, then installed packages' entry
    points); ``UnknownEnvFactory`` naming the nearest names and how to register otherwise."""
    check_factory_name(name)
    if name in _FACTORIES:
        return _FACTORIES[name]
    installed = _installed().get(name)
    if installed is not None:
        factory = installed.load()  # type: ignore[attr-defined]
        register_env_factory(name, factory)
        return factory
    known = env_factory_names()
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    raise UnknownEnvFactory(
        f"no env factory {name!r} is registered" + (f"; did you mean {' or '.join(near)}?" if near else "")
        + f" (registered: {', '.join(known) or 'none'}); register it with rubricgym.register_env_factory(name, fn) "
        f"before the run starts (also before --resume), or install the package that provides it")
