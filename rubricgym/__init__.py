"""rubricgym: Gymnasium environments and rubric rewards for long-horizon LLM agents.

``import rubricgym`` discovers every installed benchmark plugin (entry-point group
``rubricgym.benchmarks``) and registers its env ids with gymnasium. The names below are the
public API; plugins import only these (and the ``__all__`` of the modules they name).

>>> import gymnasium as gym
>>> env = gym.make("ALFWorld-Rubric-v0")
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("<think>first look</think><action>look</action>")
>>> info["transition"].facts.parsed, sorted(info["rubric"])
(True, ['trca'])
>>> env.close()
"""

import importlib
from typing import Any

from rubricgym.adapter import (
    Adapter,
    EngineFailure,
    EngineReset,
    EngineState,
    EngineStep,
    PolicyFailure,
    TaskBinding,
)
from rubricgym.attach import attach_reward
from rubricgym.benchmark import BenchmarkSpec, CommandSpec, EnvIdSpec
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
from rubricgym.env_factories import UnknownEnvFactory, env_factory_names, register_env_factory
from rubricgym.parsing import ACTION_GRAMMAR, ExpertAction, TagGrammar, parse_response
from rubricgym.records import StepRecords, step_records
from rubricgym.remote import REMOTE_ENV_ID, register_remote_env
from rubricgym.registration import (
    BENCHMARKS,
    BenchmarkNotInstalled,
    UnknownBenchmark,
    check_env_id,
    discover,
    env_ids,
    get_spec,
    make,
    make_rubric_env,
    nearest_env_ids,
    register_benchmark,
    task_ids,
)
from rubricgym.rewards import ComponentScore, RewardComponent, RewardContext, RewardSpec, RubricReward

__version__ = "0.1.0"


def evaluate(env_id: str, agent: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``rubricgym eval`` from Python, the agent an object or a function (sync or async):
    ``evaluate(env_id, agent, tasks=N, samples=K, concurrency=C, out="runs/eval")`` returns the
    summary and writes OUT/episodes.jsonl and OUT/summary.json. All its options:
    ``rubricgym.trainers.eval.api.evaluate`` (docs/eval.md). The eval code loads on this first
    call, so ``import rubricgym`` stays light."""
    return importlib.import_module("rubricgym.trainers.eval.api").evaluate(env_id, agent, *args, **kwargs)


discover()
register_remote_env()  # rubricgym/Remote-v0: a served env (rubricgym serve-env), played from here

__all__ = [
    "ACTION_GRAMMAR",
    "Adapter",
    "BENCHMARKS",
    "REMOTE_ENV_ID",
    "BenchmarkNotInstalled",
    "BenchmarkSpec",
    "CommandSpec",
    "ComponentScore",
    "EngineFailure",
    "EngineReset",
    "EngineState",
    "EngineStep",
    "EnvIdSpec",
    "ExpertAction",
    "Facts",
    "Outcome",
    "ParseError",
    "ParsedAction",
    "PolicyFailure",
    "RewardComponent",
    "RewardContext",
    "RewardSpec",
    "RubricEnv",
    "RubricReward",
    "StepRecords",
    "TagGrammar",
    "TaskBinding",
    "Trajectory",
    "Transition",
    "UnknownBenchmark",
    "UnknownEnvFactory",
    "attach_reward",
    "check_env_id",
    "discover",
    "env_factory_names",
    "evaluate",
    "env_ids",
    "get_spec",
    "load_jsonl",
    "make",
    "make_rubric_env",
    "nearest_env_ids",
    "parse_response",
    "register_benchmark",
    "register_env_factory",
    "save_jsonl",
    "step_records",
    "task_ids",
]
