"""The benchmark registry: entry-point discovery, specs, env ids, clear errors."""

import subprocess
import sys
from importlib.metadata import entry_points

import gymnasium as gym
import pytest

import rubricgym
from rubricgym.adapter import TaskBinding
from rubricgym.benchmark import BenchmarkSpec, EnvIdSpec, load_ref
from rubricgym.contract import model_ref
from rubricgym.contract import Facts
from rubricgym.registration import (
    BENCHMARKS,
    ENTRY_POINT_GROUP,
    UnknownBenchmark,
    get_spec,
    make_rubric_env,
    register_benchmark,
)


class GhostFacts(Facts):
    benchmark = "Ghost"


def test_every_entry_point_is_a_registered_spec_with_its_ids():
    names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert {"alfworld", "appworld"} <= names
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        spec = ep.load()
        assert BENCHMARKS[spec.name] is spec
        for env in spec.env_ids:
            assert env.id in gym.registry and get_spec(env.id) is spec
        assert spec.facts_model.benchmark == spec.name
        assert callable(load_ref(spec.binder))
        if spec.operator_library is not None:
            assert spec.operator_library.is_file()
        if spec.judge_rubric is not None:
            assert spec.judge_rubric.is_file()


def test_missing_benchmark_dependency_names_the_extra():
    register_benchmark(BenchmarkSpec(
        name="Ghost", facts_model=GhostFacts, binding_model=TaskBinding, binder="ghost_bench_pkg:bind_task",
        adapter="ghost_bench_pkg:Adapter", extra="ghost", requires=("ghost_bench_pkg",),
        env_ids=(EnvIdSpec("Ghost-Rubric-v0"),)))
    with pytest.raises(rubricgym.BenchmarkNotInstalled, match=r"rubricgym\[ghost\]"):
        gym.make("Ghost-Rubric-v0")
    with pytest.raises(rubricgym.BenchmarkNotInstalled):
        make_rubric_env("Ghost")


def test_spec_checks_itself():
    with pytest.raises(ValueError, match="facts_model.benchmark"):
        BenchmarkSpec(name="Other", facts_model=GhostFacts, binding_model=TaskBinding, binder="m:f")
    with pytest.raises(TypeError, match="Facts subclass"):
        BenchmarkSpec(name="Ghost", facts_model=dict, binding_model=TaskBinding, binder="m:f")
    with pytest.raises(ValueError, match="need an adapter"):
        BenchmarkSpec(name="Ghost", facts_model=GhostFacts, binding_model=TaskBinding, binder="m:f",
                      env_ids=(EnvIdSpec("X-v0"),))
    assert model_ref(GhostFacts) == f"{__name__}:GhostFacts"


def test_unknown_benchmark_is_a_clear_lookup_error():
    with pytest.raises(UnknownBenchmark, match="NoSuch"):
        get_spec("NoSuch")
    assert get_spec("alfworld").name == "ALFWorld" and get_spec("ALFWorld-Rubric-Eval-v0").name == "ALFWorld"


def test_a_broken_plugin_does_not_break_import(tmp_path):
    """A third-party entry point that fails to load is reported and skipped."""
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbroken = no_such_module_xyz.spec:SPEC\n")
    code = ("import warnings, gymnasium as gym\nwith warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n    import rubricgym\n"
            "print('ALFWorld-Rubric-v0' in gym.registry, any('broken' in str(x.message) for x in w))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_cli_help_runs():
    out = subprocess.run([sys.executable, "-m", "rubricgym.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "library" in out.stdout
