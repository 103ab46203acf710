"""rubricgym: Gymnasium environments and rubric rewards for long-horizon LLM agents.

``import rubricgym`` registers every env id (``gym.make("ALFWorld-Rubric-v0")``).
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
from rubricgym.registration import BENCHMARKS, BenchmarkNotInstalled, make_rubric_env

__version__ = "0.1.0"

__all__ = [
    "ACTION_GRAMMAR",
    "Adapter",
    "BENCHMARKS",
    "BenchmarkNotInstalled",
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
