"""ALFWorld's benchmark spec (entry point ``rubricgym.benchmarks: alfworld``)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubricgym import BenchmarkSpec, EnvIdSpec
from rubricgym.adapters.alfworld.engine import resolve_split_dir
from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts
from rubricgym.benchmark import Resource

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.alfworld"


def missing_games(options: Mapping[str, Any]) -> str | None:
    """Where games were looked for, when a location the user named (``data_path=``,
    ``$ALFWORLD_DATA``) holds none: checked before alfworld is imported (engine.py is stdlib only)."""
    try:
        resolve_split_dir(options.get("split", "train"), options.get("data_path"))
    except FileNotFoundError as exc:
        return str(exc)
    except ValueError:  # an unknown split: the adapter's own error says which ones exist
        return None
    return None


GAMES = Resource(
    name="its games (official data under $ALFWORLD_DATA or data_path=, else the bundled ones)",
    fix="point $ALFWORLD_DATA (or data_path=) at the folder holding json_2.1.1/ (`alfworld-download`), "
        "or unset it to play the bundled games",
    check=f"{_PACKAGE}.spec:missing_games",
)

SPEC = BenchmarkSpec(
    name="ALFWorld",
    description="alfworld's real TextWorld PDDL engine; 36 bundled generated games or official data",
    facts_model=ALFWorldFacts,
    binding_model=ALFWorldBinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:ALFWorldAdapter",
    extra="alfworld",
    requires=("alfworld", "textworld"),
    resources=(GAMES,),
    env_ids=(
        EnvIdSpec("ALFWorld-Rubric-v0", {"split": "train"}, "24 bundled train games (or official train)",
                  eval_id="ALFWorld-Rubric-Eval-v0"),
        EnvIdSpec("ALFWorld-Rubric-Eval-v0", {"split": "eval"}, "12 bundled eval games (or official valid_seen)"),
    ),
    max_steps=25,
    operator_library=_HERE.parent.parent / "operator_libraries" / "alfworld.yaml",
    judge_rubric=_HERE / "rubric.yaml",
    context_key="task type, stage, location, inventory and the states of the task's objects",
    expert=f"{_PACKAGE}.expert:expert_actions",
)
