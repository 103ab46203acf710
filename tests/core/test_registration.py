import subprocess
import sys

import gymnasium as gym
import pytest

import rubricgym
from rubricgym.registration import BENCHMARKS, BenchmarkSpec, make_rubric_env, register_benchmark


def test_ids_registered_on_import():
    for spec in BENCHMARKS.values():
        for env_id in spec.env_ids:
            assert env_id in gym.registry


def test_missing_benchmark_dependency_names_the_extra():
    register_benchmark(
        BenchmarkSpec(
            name="Ghost",
            adapter="ghost_bench_pkg:Adapter",
            extra="ghost",
            requires=("ghost_bench_pkg",),
            env_ids={"Ghost-Rubric-v0": {}},
        )
    )
    with pytest.raises(rubricgym.BenchmarkNotInstalled, match=r"rubricgym\[ghost\]"):
        gym.make("Ghost-Rubric-v0")
    with pytest.raises(rubricgym.BenchmarkNotInstalled):
        make_rubric_env("Ghost")


def test_cli_help_runs():
    out = subprocess.run([sys.executable, "-m", "rubricgym.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "library" in out.stdout
