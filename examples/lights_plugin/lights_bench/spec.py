"""The plugin's spec: named in pyproject.toml's `rubricgym.benchmarks` entry-point group."""

from pathlib import Path

from rubricgym import BenchmarkSpec, EnvIdSpec
from lights_bench.facts import LightsBinding, LightsFacts

SPEC = BenchmarkSpec(
    name="Lights",
    facts_model=LightsFacts,
    binding_model=LightsBinding,
    binder="lights_bench.binder:bind_task",
    adapter="lights_bench.adapter:LightsAdapter",
    env_ids=(EnvIdSpec("Lights-Rubric-v0", {}, "switch every lamp on"),),
    max_steps=6,
    operator_library=Path(__file__).with_name("library.yaml"),
    context_key="which lamps are on",
    expert="lights_bench.expert:expert",
)
