"""The one function that picks the run's ``ParallelStrategy``."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from rubricgym.trainers.parallel.base import ParallelStrategy
from rubricgym.trainers.parallel.fsdp import FsdpStrategy
from rubricgym.trainers.parallel.plan import ParallelPlan, choose_plan
from rubricgym.trainers.parallel.ranks import Ranks, init_ranks
from rubricgym.trainers.parallel.settings import ParallelSettings
from rubricgym.trainers.parallel.zero import ZeroStrategy

log = logging.getLogger(__name__)

STRATEGIES: dict[str, type[ParallelStrategy]] = {"replicated": ParallelStrategy, "fsdp": FsdpStrategy,
                                                 "zero": ZeroStrategy}


def plan_for(settings: ParallelSettings, environ: Mapping[str, str] | None = None) -> ParallelPlan:
    """The run's plan from its parallel settings and the launcher's variables (refusals first)."""
    return choose_plan(settings.fsdp, settings.deepspeed_zero, settings.mixed_precision, settings.accelerate_config,
                       os.environ if environ is None else environ)


def single_process() -> ParallelStrategy:
    """The strategy of code that runs outside a training run (tests, a checkpoint reader)."""
    return ParallelStrategy(Ranks(), ParallelPlan())


def choose_strategy(settings: ParallelSettings, *, cuda: bool, generation_backend: str, self_judge: bool,
                    environ: Mapping[str, str] | None = None) -> ParallelStrategy:
    """The one decision: the plan (refused before anything loads), the process group (gloo on
    CPU, nccl on CUDA), then the strategy. A partitioning engine asked for by one process
    outside a process group has nothing to partition: the model stays whole (logged); inside a
    group of one (a program that opened it, e.g. scripts/gpu_check.sh) the engine runs."""
    plan = plan_for(settings, environ)
    ranks = init_ranks(settings.collective_timeout_s, cuda=cuda)
    if plan.engine != "replicated" and not ranks.grouped:
        log.warning("%s with one process and no process group: nothing to shard; the model stays whole", plan.engine)
        plan = ParallelPlan(mixed_precision=plan.mixed_precision)
    strategy = STRATEGIES[plan.engine](ranks, plan)
    strategy.check_run(generation_backend, self_judge)
    return strategy
