"""What a benchmark plugin declares: ``BenchmarkSpec``.

Each adapter package (built in or third party) exposes one ``SPEC`` in its ``spec.py`` and
names it in the ``rubricgym.benchmarks`` entry-point group of its ``pyproject.toml``::

    [project.entry-points."rubricgym.benchmarks"]
    mybench = "mypackage.spec:SPEC"

The spec module must import only light things (its facts models, rubricgym core): it is
loaded by ``import rubricgym``. Everything heavy (the adapter and its engine, the binder,
the expert player, CLI commands) is named by an ``"module:attribute"`` reference and
imported only when used, so a missing optional dependency fails with the extra to install.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rubricgym.adapter import Adapter, TaskBinding
from rubricgym.contract import Facts
from rubricgym.parsing import ExpertAction
from rubricgym.rewards import RewardContext

__all__ = ["NO_TOOL_SURFACE", "BenchmarkSpec", "CommandSpec", "EnvIdSpec", "ExpertPlayer", "Ref", "Resource",
           "load_ref"]

Ref = str
"""``"package.module:attribute"``: imported on first use, never at registration."""

NO_TOOL_SURFACE = "none"
"""``BenchmarkSpec.tool_surface`` of a benchmark whose actions are not tool calls."""


def load_ref(ref: Ref) -> Any:
    """Import ``ref`` (``"module:attribute"``); a ``ValueError`` names a malformed one."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"reference {ref!r} must look like 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class EnvIdSpec:
    """One gymnasium id of a benchmark and the adapter keyword arguments behind it.
    ``eval_id`` names the id of held-out tasks for this one (never trained on): the trainer
    evaluates there."""

    id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    eval_id: str | None = None


def _module_folder(name: str) -> Path | None:
    """The folder (or file) an importable module lives at, found without importing it (a
    dotted name imports its parent packages); None when it is not importable."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a missing parent package; a module set to None in sys.modules
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin else None


@dataclass(frozen=True)
class Resource:
    """Something a benchmark's engine needs at run time and loads lazily (a model package and
    its data, a venv, a data folder): ``gym.make`` checks it before the adapter is built, so a
    missing piece fails there, naming what is missing and ``fix``, instead of mid-episode.

    Every check is cheap: ``modules`` are found (``importlib.util.find_spec``), never imported;
    ``files`` are glob patterns that must each match an existing path: a ``Path`` is a path on
    disk (``~`` and ``$VARS`` expanded), a string ``"module:pattern"`` is a pattern inside that
    module's folder (a model package's data); ``check`` references a function of the env's
    adapter options (the env id's kwargs with the caller's) returning what is wrong (with the
    value) or None, for what depends on the options; its module must import only light things.
    """

    name: str
    fix: str
    modules: tuple[str, ...] = ()
    files: tuple[str | Path, ...] = ()
    check: Ref | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.fix:
            raise ValueError("a Resource needs a name (what it is) and a fix (how to get it)")
        for pattern in self.files:
            if isinstance(pattern, str) and ":" not in pattern:
                raise ValueError(f"resource {self.name!r}: file {pattern!r} must be a Path, or 'module:pattern' "
                                 "for a pattern inside a module's folder")
        if self.check is not None and ":" not in self.check:
            raise ValueError(f"resource {self.name!r}: check must be 'package.module:function'")

    def problem(self, options: Mapping[str, Any]) -> str | None:
        """What is missing (with the value looked for), or None when everything is there."""
        for module in self.modules:
            if _module_folder(module) is None:
                return f"module {module!r} is not importable"
        for pattern in self.files:
            if isinstance(pattern, Path):
                where = os.path.expandvars(os.path.expanduser(str(pattern)))
            else:
                module, _, inside = pattern.partition(":")
                folder = _module_folder(module)
                if folder is None:
                    return f"module {module!r} is not importable"
                where = str(folder / inside)
            if not glob.glob(where):
                return f"{where} does not exist"
        return load_ref(self.check)(options) if self.check else None


@dataclass(frozen=True)
class CommandSpec:
    """A ``rubricgym <name>`` subcommand a benchmark contributes (module with
    ``add_arguments(parser)`` and ``run(args) -> int``)."""

    name: str
    module: str
    help: str


ExpertPlayer = Callable[[Adapter], Sequence["str | ExpertAction"]]
"""Called right after a reset with the env's adapter; returns the actions that solve the
current task (used by ``rubricgym demo`` and the trainer's warm start)."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """Everything rubricgym needs to know about one benchmark.

    ``facts_model`` / ``binding_model`` are the classes themselves (light pydantic models);
    ``adapter``, ``binder``, ``expert`` are references imported on use. A binder-only
    benchmark (no engine yet) leaves ``adapter`` empty and registers no env ids.
    ``tool_surface`` references a function of the env's construction options returning its
    tools (``rubricgym.tool_surface.ToolSpec``); unset, the benchmark gets one ``act(command)``
    tool; ``"none"`` says its actions are not tool calls. ``requires`` are the modules its
    adapter imports (a missing one names the extra to install); ``resources`` what its engine
    loads later (``Resource``): ``gym.make`` checks both before building the adapter.
    """

    name: str
    facts_model: type[Facts]
    binding_model: type[TaskBinding]
    binder: Ref
    adapter: Ref | None = None
    extra: str = ""
    requires: tuple[str, ...] = ()
    setup_hint: str = ""
    env_ids: tuple[EnvIdSpec, ...] = ()
    max_steps: int = 50
    operator_library: Path | None = None
    judge_rubric: Path | None = None
    context_key: str = ""
    commands: tuple[CommandSpec, ...] = ()
    expert: Ref | None = None
    expert_replans: bool = False
    """Whether ``expert``, called mid-episode, solves the task from the state the episode is in
    (not only right after a reset); the warm start's recovery demonstrations need it."""
    description: str = ""
    tool_surface: Ref | None = None
    outcome: Literal["return", "success"] = "return"
    """What the episode advantage A_E standardizes by default for this benchmark: the summed
    engine reward (``return``), or the papers' binary success (``success``). They are the same
    where the engine pays 1 for a success and 0 otherwise; a benchmark with partial scores says
    which it trains on (docs/design.md, "Outcome")."""
    resources: tuple[Resource, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"benchmark name {self.name!r} must be alphanumeric (with - or _)")
        if not (isinstance(self.facts_model, type) and issubclass(self.facts_model, Facts)):
            raise TypeError(f"{self.name}: facts_model must be a Facts subclass")
        if not (isinstance(self.binding_model, type) and issubclass(self.binding_model, TaskBinding)):
            raise TypeError(f"{self.name}: binding_model must be a TaskBinding subclass")
        if self.outcome not in ("return", "success"):
            raise ValueError(f"{self.name}: outcome must be 'return' or 'success', got {self.outcome!r}")
        if self.env_ids and not self.adapter:
            raise ValueError(f"{self.name}: env ids need an adapter reference")
        ids = {e.id for e in self.env_ids}
        for env in self.env_ids:
            if env.eval_id is not None and (env.eval_id not in ids or env.eval_id == env.id):
                raise ValueError(f"{self.name}: {env.id}'s eval_id {env.eval_id!r} must be another of its env ids")
        if self.tool_surface not in (None, NO_TOOL_SURFACE) and ":" not in self.tool_surface:
            raise ValueError(f"{self.name}: tool_surface must be 'package.module:function' or 'none'")
        if self.facts_model.benchmark != self.name:
            raise ValueError(f"{self.name}: facts_model.benchmark is {self.facts_model.benchmark!r}; "
                             "it must equal the spec's name so stored trajectories load back typed")

    @property
    def install_hint(self) -> str:
        hint = f"pip install 'rubricgym[{self.extra}]'" if self.extra else "install its package"
        return hint + (f"; {self.setup_hint}" if self.setup_hint else "")

    def env_id(self, env_id: str) -> EnvIdSpec:
        for spec in self.env_ids:
            if spec.id == env_id:
                return spec
        raise KeyError(f"{self.name} has no env id {env_id!r} (ids: {[e.id for e in self.env_ids]})")

    def reward_context(self) -> RewardContext:
        """What reward specs may know of this benchmark (its models and shipped files)."""
        return RewardContext(benchmark=self.name, facts_model=self.facts_model, binding_model=self.binding_model,
                             operator_library=self.operator_library, judge_rubric=self.judge_rubric)

    def load_binder(self) -> Callable[..., TaskBinding]:
        return load_ref(self.binder)

    def load_expert(self) -> ExpertPlayer | None:
        return load_ref(self.expert) if self.expert else None
