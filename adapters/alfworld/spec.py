"""ALFWorld's benchmark spec (entry point ``rubricgym.benchmarks: alfworld``)."""

from pathlib import Path

from rubricgym import BenchmarkSpec, EnvIdSpec
from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.alfworld"

SPEC = BenchmarkSpec(
    name="ALFWorld",
    description="alfworld's real TextWorld PDDL engine; 36 bundled generated games or official data",
    facts_model=ALFWorldFacts,
    binding_model=ALFWorldBinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:ALFWorldAdapter",
    extra="alfworld",
    requires=("alfworld", "textworld"),
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
    expert_replans=True,
)
