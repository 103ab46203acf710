"""rubricgym: Gymnasium environments and rubric rewards for long-horizon LLM agents.

``import rubricgym`` discovers every installed benchmark plugin (entry-point group
``rubricgym.benchmarks``) and registers its env ids with gymnasium.
"""

from rubricgym.adapter import Adapter, EngineFailure, EngineReset, EngineState, EngineStep, TaskBinding
from rubricgym.contract import (
    Facts,
    Outcome,
    ParsedAction,
    ParseError,
    Trajectory,
    Transition,
    load_jsonl,
    save_jsonl,
)
from rubricgym.env import RubricEnv
from rubricgym.parsing import ACTION_GRAMMAR, TagGrammar, parse_response
from rubricgym.benchmark import BenchmarkSpec, CommandSpec, EnvIdSpec, ExpertAction
from rubricgym.registration import (
    BENCHMARKS,
    BenchmarkNotInstalled,
    UnknownBenchmark,
    discover,
    get_spec,
    make_rubric_env,
    register_benchmark,
)

__version__ = "0.1.0"

discover()

__all__ = [
    "ACTION_GRAMMAR",
    "Adapter",
    "BENCHMARKS",
    "BenchmarkNotInstalled",
    "BenchmarkSpec",
    "CommandSpec",
    "EnvIdSpec",
    "ExpertAction",
    "UnknownBenchmark",
    "discover",
    "get_spec",
    "register_benchmark",
    "EngineFailure",
    "EngineReset",
    "EngineState",
    "EngineStep",
    "Facts",
    "Outcome",
    "ParseError",
    "ParsedAction",
    "RubricEnv",
    "TagGrammar",
    "TaskBinding",
    "Trajectory",
    "Transition",
    "load_jsonl",
    "make_rubric_env",
    "parse_response",
    "save_jsonl",
]
