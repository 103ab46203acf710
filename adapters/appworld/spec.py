"""AppWorld's benchmark spec (entry point ``rubricgym.benchmarks: appworld``)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubricgym import BenchmarkSpec, CommandSpec, EnvIdSpec
from rubricgym.adapters.appworld.facts import AppWorldBinding, AppWorldFacts
from rubricgym.adapters.appworld.paths import SETUP_HINT, AppWorldNotSetUp, appworld_python
from rubricgym.benchmark import Resource

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.appworld"


def missing_venv(options: Mapping[str, Any]) -> str | None:
    """Where AppWorld's own python was looked for, when it is not there (a path check: its
    server is started only at the first reset). The data roots are checked by the adapter."""
    try:
        appworld_python()
    except AppWorldNotSetUp as exc:
        return str(exc).removesuffix(f": {SETUP_HINT}")
    return None


APPWORLD_VENV = Resource(
    name="its own venv (AppWorld's environment server runs there, started at the first reset)",
    fix=f"{SETUP_HINT}, or set RUBRICGYM_APPWORLD_PYTHON to the python of a venv with AppWorld installed",
    check=f"{_PACKAGE}.spec:missing_venv",
)

SPEC = BenchmarkSpec(
    name="AppWorld",
    description="AppWorld's own environment server (own venv, HTTP on 127.0.0.1)",
    facts_model=AppWorldFacts,
    binding_model=AppWorldBinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:AppWorldAdapter",
    expert=f"{_PACKAGE}.expert:expert_actions",
    tool_surface=f"{_PACKAGE}.tools:tool_surface",
    extra="appworld",
    requires=("httpx",),
    setup_hint="then build AppWorld's venv and offline tasks with `rubricgym appworld setup` (or `make appworld`)",
    resources=(APPWORLD_VENV,),
    env_ids=(
        EnvIdSpec("AppWorld-Rubric-v0", {"split": "default"}, "offline train split, generated at set-up",
                  eval_id="AppWorld-Rubric-Eval-v0"),
        EnvIdSpec("AppWorld-Rubric-Eval-v0", {"split": "offline_dev"}, "offline dev split: held-out scenarios"),
        EnvIdSpec("AppWorld-Rubric-Train-v0", {"split": "train"}, "official train split (APPWORLD_ROOT)",
                  eval_id="AppWorld-Rubric-Dev-v0"),
        EnvIdSpec("AppWorld-Rubric-Dev-v0", {"split": "dev"}, "official dev split (APPWORLD_ROOT)"),
        EnvIdSpec("AppWorld-Rubric-TestNormal-v0", {"split": "test_normal"}, "official test_normal (APPWORLD_ROOT)"),
        EnvIdSpec("AppWorld-Rubric-TestChallenge-v0", {"split": "test_challenge"},
                  "official test_challenge (APPWORLD_ROOT)"),
    ),
    max_steps=30,
    operator_library=_HERE.parent.parent / "operator_libraries" / "appworld.yaml",
    judge_rubric=_HERE / "rubric.yaml",
    context_key="apps touched, apps authenticated, stage (start/explored/authenticated/mutated/completed)",
    commands=(CommandSpec("appworld", f"{_PACKAGE}.cli", "build AppWorld's venv and offline data, list tasks, serve"),),
)
