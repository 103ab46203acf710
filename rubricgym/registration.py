"""The benchmark registry and the factory behind ``gym.make("<Benchmark>-Rubric-v0")``.

Benchmarks are discovered through the ``rubricgym.benchmarks`` entry-point group (the
built-in ones use it too), so an installed third-party package adds a benchmark and its
env ids with no change to rubricgym. Adapter modules are imported only when an env is made,
after the spec's ``requires`` and ``resources`` are checked. A spec registered in code
(``register_benchmark``, e.g. in a notebook) is this process's only: a spawned process gets it
with ``registered_in_process`` here and ``register_benchmarks`` there (``rubricgym eval``'s
workers do).
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import sys
import warnings
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym

from rubricgym.attach import attach_reward
from rubricgym.benchmark import BenchmarkSpec, ExpertPlayer, load_ref
from rubricgym.contract import model_ref, register_models
from rubricgym.env import RubricEnv
from rubricgym.process_state import preserved_process_state
from rubricgym.secret_refs import refuse_inline_secrets

__all__ = [
    "BENCHMARKS", "ENTRY_POINT_GROUP", "BenchmarkNotInstalled", "MissingResource", "UnknownBenchmark",
    "check_env_id", "check_resources", "discover", "env_ids", "make", "nearest_env_ids",
    "get_spec", "judge_rubric_file", "make_rubric_env", "operator_library", "register_benchmark",
    "register_benchmarks", "register_client_env_id", "registered_in_process", "task_ids",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "rubricgym.benchmarks"

BENCHMARKS: dict[str, BenchmarkSpec] = {}
_ENV_IDS: dict[str, str] = {}  # env id -> benchmark name
_CLIENT_ENV_IDS: set[str] = set()  # env ids that play a benchmark elsewhere (a served env's client)
_IN_PROCESS: dict[str, BenchmarkSpec] = {}  # registered in code, not through an installed entry point
_discovered = False


class BenchmarkNotInstalled(ImportError):
    """An env id was made whose benchmark's optional dependencies are missing."""


class MissingResource(BenchmarkNotInstalled):
    """A resource the benchmark's spec declares (``BenchmarkSpec.resources``: a model package's
    data, a venv, a data file) is missing; the message names it, the value and the fix."""


class UnknownBenchmark(LookupError):
    """No registered benchmark has that name (or env id)."""


def register_benchmark(spec: BenchmarkSpec) -> None:
    """Add a benchmark and register its env ids with gymnasium (idempotent per name). Called in
    code (a notebook, a launcher) it is this process's registration: ``registered_in_process``
    hands it to spawned processes."""
    _add_benchmark(spec)
    _IN_PROCESS[spec.name] = spec


def register_benchmarks(specs: Iterable[BenchmarkSpec]) -> None:
    """``register_benchmark`` for each spec (a spawned process's initializer, with what
    ``registered_in_process`` gave in the parent)."""
    for spec in specs:
        register_benchmark(spec)


def registered_in_process(*names: str) -> tuple[BenchmarkSpec, ...]:
    """The specs this process registered in code (not discovered through an installed entry
    point): all of them, or those of the named benchmarks or env ids (others are left out). A
    spawned process discovers only installed plugins; it re-registers these with
    ``register_benchmarks``. They travel by reference: their classes and ``module:attribute``
    references are imported there by module path (nothing is pickled as code), so a spec
    naming something a spawned process cannot import (a class defined in a notebook cell, a
    function's local class) is refused here, with the fix."""
    wanted = {_ENV_IDS.get(n, n) for n in names}
    specs = tuple(spec for name, spec in _IN_PROCESS.items() if not names or name in wanted)
    for spec in specs:
        problem = _not_importable_elsewhere(spec)
        if problem:
            raise ValueError(f"benchmark {spec.name!r} was registered in this process, but {problem}, which a "
                             "spawned worker process cannot import: define its models and code in a module on "
                             "sys.path (a .py file next to the notebook, e.g. mybench.py), import them from there, "
                             "and register the spec again (docs/adapters.md, 'In-process registration')")
    return specs


def _not_importable_elsewhere(spec: BenchmarkSpec) -> str | None:
    main = sys.modules.get("__main__")
    main_is_importable = bool(getattr(main, "__file__", None))  # a script: spawn re-imports it; a notebook's is not
    for what, obj in (("its facts model", spec.facts_model), ("its binding model", spec.binding_model)):
        if "<locals>" in obj.__qualname__:
            return f"{what} {obj.__qualname__} is defined inside a function"
        if obj.__module__ == "__main__" and not main_is_importable:
            return f"{what} {obj.__qualname__} is defined in __main__ (an interactive session)"
    refs = [spec.binder, spec.adapter, spec.expert, spec.tool_surface, *(r.check for r in spec.resources)]
    for ref in refs:
        if ref and ref.partition(":")[0] == "__main__" and not main_is_importable:
            return f"the reference {ref!r} points into __main__ (an interactive session)"
    return None


def _add_benchmark(spec: BenchmarkSpec) -> None:
    old = BENCHMARKS.get(spec.name)
    if old is not None and model_ref(old.facts_model) != model_ref(spec.facts_model):
        raise ValueError(f"benchmark {spec.name!r} is registered twice, with different facts models")
    register_models(spec.name, spec.facts_model, spec.binding_model)
    BENCHMARKS[spec.name] = spec
    for env in spec.env_ids:
        owner = _ENV_IDS.setdefault(env.id, spec.name)
        if owner != spec.name:
            raise ValueError(f"env id {env.id!r} of {spec.name} is already registered by {owner}")
        if env.id in gym.registry:
            continue
        gym.register(
            id=env.id,
            entry_point="rubricgym.registration:make_rubric_env",
            kwargs={"benchmark": spec.name, **env.kwargs},
            max_episode_steps=None,
            disable_env_checker=False,
        )


def discover() -> dict[str, BenchmarkSpec]:
    """Load every spec named in the entry-point group, once. A broken plugin is reported and
    skipped: it must not stop ``import rubricgym`` for everyone else."""
    global _discovered
    if _discovered:
        return BENCHMARKS
    _discovered = True
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            spec = ep.load()
            if not isinstance(spec, BenchmarkSpec):
                raise TypeError(f"{ep.value} is a {type(spec).__name__}, not a BenchmarkSpec")
            _add_benchmark(spec)
        except Exception as exc:  # a third-party plugin's bug is not ours to raise
            warnings.warn(f"rubricgym: benchmark plugin {ep.name!r} ({ep.value}) not loaded: {exc}",
                          RuntimeWarning, stacklevel=2)
    return BENCHMARKS


def get_spec(name: str) -> BenchmarkSpec:
    """The spec of a benchmark by name (case-insensitive) or by one of its env ids."""
    discover()
    if name in BENCHMARKS:
        return BENCHMARKS[name]
    if name in _ENV_IDS:
        return BENCHMARKS[_ENV_IDS[name]]
    for key, spec in BENCHMARKS.items():
        if key.lower() == name.lower():
            return spec
    raise UnknownBenchmark(f"no benchmark or env id {name!r} is registered{_did_you_mean(name)} "
                           f"(benchmarks: {', '.join(sorted(BENCHMARKS))}; rubricgym.env_ids() lists the env ids)")


def expert_of(env: Any) -> tuple[ExpertPlayer, Any] | None:
    """The env's benchmark expert player and the adapter it plays through (None: no expert)."""
    adapter = getattr(env.unwrapped, "adapter", None)
    if adapter is not None and getattr(adapter, "has_expert", True) is False:
        return None  # e.g. a served env: its engine, which an expert plays through, is on the server
    try:
        expert = get_spec(adapter.benchmark).load_expert() if adapter is not None else None
    except UnknownBenchmark:
        return None
    return (expert, adapter) if expert is not None else None


def expert_replans(env: Any) -> bool:
    """Whether ``env``'s expert player also plans from a mid-episode state
    (``BenchmarkSpec.expert_replans``)."""
    if expert_of(env) is None:
        return False
    return get_spec(env.unwrapped.adapter.benchmark).expert_replans


def has_expert(env: Any) -> bool:
    """Whether ``env``'s benchmark has an expert to warm-start from (env workers ask it without
    importing the trainer's model stack)."""
    return expert_of(env) is not None


def nearest_env_ids(name: str, count: int = 3) -> list[str]:
    """The registered rubricgym env ids closest to ``name`` (case does not count)."""
    discover()
    by_lower = {env_id.lower(): env_id for env_id in _ENV_IDS}
    if name.lower() in by_lower:
        return [by_lower[name.lower()]]
    return [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=count, cutoff=0.6)]


def _did_you_mean(name: str) -> str:
    near = nearest_env_ids(name)
    return f"; did you mean {' or '.join(near)}?" if near else ""


def check_env_id(env_id: str) -> str:
    """``env_id`` when a rubricgym benchmark registered it; else ``UnknownBenchmark`` naming
    the nearest rubricgym ids (gymnasium's own error suggests any registered env)."""
    discover()
    if env_id in _CLIENT_ENV_IDS:
        return env_id
    if env_id not in _ENV_IDS:
        raise UnknownBenchmark(f"unknown env id {env_id!r}{_did_you_mean(env_id)} "
                               f"(rubricgym env ids: {', '.join(sorted(_ENV_IDS))})")
    return env_id


def is_client_env_id(env_id: str) -> bool:
    """True for an env id that plays a benchmark elsewhere (``register_client_env_id``)."""
    discover()
    return env_id in _CLIENT_ENV_IDS


def register_client_env_id(env_id: str) -> None:
    """Let ``check_env_id`` accept an env id that plays a benchmark elsewhere (its kwargs say
    where), so every command taking env ids takes it."""
    _CLIENT_ENV_IDS.add(env_id)


def make(env_id: str, **kwargs: Any) -> gym.Env[str, str]:
    """``gym.make`` for a rubricgym env id, with rubricgym's suggestion for a mistyped one."""
    return gym.make(check_env_id(env_id), **kwargs)


def task_ids(env_id: str, split: Literal["train", "eval"] = "train", **make_kwargs: Any) -> list[str]:
    """The task ids an env id plays, in order; ``split="eval"``: the tasks of the held-out env
    id its spec pairs with it (never trained on). ``make_kwargs`` as for ``gym.make``. A
    client env id (a served env) asks its server: the env is made and reset once."""
    if env_id in _CLIENT_ENV_IDS:
        if split != "train":
            raise LookupError(f"{env_id} plays one served env id: serve the held-out env id for split={split!r}")
        client = gym.make(env_id, **make_kwargs)
        try:
            client.reset()
            adapter = getattr(client.unwrapped, "adapter", None)
            if adapter is None:
                raise LookupError(f"{env_id} tells no task ids: pass them (--tasks)")
            return list(adapter.task_ids())
        finally:
            client.close()
    spec = get_spec(env_id)
    target = spec.env_id(env_id)
    if split == "eval":
        if target.eval_id is None:
            raise LookupError(f"{env_id} has no held-out pair; its spec's env ids: {[e.id for e in spec.env_ids]}")
        target = spec.env_id(target.eval_id)
    elif split != "train":
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    env = make_rubric_env(spec.name, reward="none", **{**target.kwargs, **make_kwargs})
    try:
        return list(env.unwrapped.task_ids)
    finally:
        env.close()


def operator_library(benchmark: str) -> Path:
    """The TRCA operator library a benchmark ships (its spec's), by benchmark name, env id or
    the library's file name (``alfworld.yaml``, ``alfworld``)."""
    try:
        spec = get_spec(benchmark)
    except UnknownBenchmark:
        wanted = benchmark.strip().lower()
        named = [s for s in BENCHMARKS.values() if s.operator_library is not None
                 and wanted in (Path(s.operator_library).name.lower(), Path(s.operator_library).stem.lower())]
        if not named:
            raise
        spec = named[0]
    if spec.operator_library is None:
        raise LookupError(f"no operator library ships for {spec.name}; pass reward='none', or a path to your own "
                          "library (see docs/trca.md)")
    return Path(spec.operator_library)


def judge_rubric_file(benchmark: str) -> Path:
    """The static judge rubric file a benchmark ships (its spec's), by benchmark name or env id
    (``rubricgym.judges.load_rubric`` reads it); a path to an existing file is returned as is."""
    if Path(benchmark).is_file():
        return Path(benchmark)
    spec = get_spec(benchmark)
    if spec.judge_rubric is None:
        raise LookupError(f"benchmark {spec.name} ships no judge rubric; pass a rubric file (see docs/draco.md)")
    return Path(spec.judge_rubric)


def env_ids() -> dict[str, str]:
    """Every registered env id -> its benchmark name."""
    discover()
    return dict(_ENV_IDS)


def check_installed(spec: BenchmarkSpec) -> None:
    missing = [m for m in spec.requires if importlib.util.find_spec(m) is None]
    if missing:
        raise BenchmarkNotInstalled(f"{spec.name} needs {', '.join(missing)}: {spec.install_hint}")


def check_resources(spec: BenchmarkSpec, options: Mapping[str, Any]) -> None:
    """``MissingResource`` for the first resource of the spec that is missing for an env built
    with these adapter ``options``: what it is, what was looked for, the fix."""
    for resource in spec.resources:
        problem = resource.problem(options)
        if problem:
            raise MissingResource(f"{spec.name} needs {resource.name}, which is missing: {problem}. "
                                  f"Fix: {resource.fix}")


def load_adapter_class(benchmark: str, options: Mapping[str, Any] | None = None) -> type:
    """The adapter class, once the spec's modules and resources (for these adapter options)
    are there: a missing one fails here, never mid-episode."""
    spec = get_spec(benchmark)
    if not spec.adapter:
        raise BenchmarkNotInstalled(f"{spec.name} has a task binder but no engine adapter")
    check_installed(spec)
    check_resources(spec, options or {})
    return load_ref(spec.adapter)


def make_rubric_env(
    benchmark: str,
    reward: Any = "default",
    max_steps: int | None = None,
    render_mode: str | None = None,
    **adapter_kwargs: Any,
) -> gym.Env:
    """Build ``RubricEnv`` for a benchmark and attach its reward (``rubricgym.attach``);
    ``max_steps`` defaults to the spec's."""
    spec = get_spec(benchmark)
    # a key passed as an engine option would be echoed by gymnasium's TypeError (it prints the
    # kwargs) and by run folders: refused here, by name and by shape, without echoing it
    refuse_inline_secrets(adapter_kwargs, f"{spec.name} env options")
    with preserved_process_state():  # an engine's import-time side effects stay out of the caller's process
        adapter = load_adapter_class(spec.name, adapter_kwargs)(**adapter_kwargs)
    env: gym.Env[str, str] = RubricEnv(adapter, max_steps=max_steps or spec.max_steps, render_mode=render_mode)
    try:
        return attach_reward(env, reward, spec.reward_context())
    except BaseException:
        env.close()
        raise
