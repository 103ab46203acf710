"""The GRPO-family training loop: rollouts -> credit -> update -> log -> checkpoint.

Read ``Trainer.train_iteration`` top to bottom for one training step.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from tqdm.auto import tqdm

from rubricgym.judges.client import TransformersChatBackend
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.pipeline import DracoJudge
from rubricgym.judges.rubric import load_rubric
from rubricgym.models import load_causal_lm
from rubricgym.records import step_records
from rubricgym.registration import has_expert, judge_rubric_file
from rubricgym.trainers.advantages import assign_advantages
from rubricgym.trainers.checkpoint import (CheckpointError, atomic_write_text, latest_checkpoint, restore_checkpoint,
                                           restore_latest, save_checkpoint)
from rubricgym.trainers.config import TrainConfig, dump_config
from rubricgym.trainers.distributed import merge_rank_metrics, rng_snapshot
from rubricgym.trainers.env_workers import build_collector
from rubricgym.trainers.evaluation import EvalResult, Evaluator, build_evaluator, distinct_group_share, policy_entropy
from rubricgym.trainers.generation import HFGenerator, VLLMGenerator, stop_token_ids
from rubricgym.trainers.generation_server import OpenAIServerGenerator
from rubricgym.trainers.rollout import Rollout, RolloutCollector, RolloutTimings, available_tasks, make_env_factory
from rubricgym.trainers.run_files import (append_run_line, cut_metrics, load_run_config, read_metrics_lines,
                                          refuse_links_outside, write_run_file)
from rubricgym.trainers.run_loggers import RunLoggers
from rubricgym.trainers.parallel.base import ParallelStrategy
from rubricgym.trainers.parallel.choose import choose_strategy
from rubricgym.trainers.parallel.ranks import Ranks
from rubricgym.trainers.update import ppo_update
from rubricgym.trainers.reference import KLReference
from rubricgym.trainers.warmup import Demonstration, collect_demonstrations, label_visited_states, run_warmup
from rubricgym.yaml_files import read_yaml_file

log = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
WARMUP_FILE = "warmup.json"
EVALUATIONS_FILE = "evaluations.json"


def default_threads() -> int:
    """The usable CPUs (shared by the processes of this machine), at most 2, and at most
    ``$OMP_NUM_THREADS`` when set: more OpenMP threads than cores (or than a 135M model can
    use) only spin."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    usable //= max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if omp.isdigit() and int(omp) > 0:
        usable = min(usable, int(omp))
    return max(1, min(2, usable))


def derive_seed(*parts: int) -> int:
    """A 31-bit seed from integers (stable across runs and processes)."""
    return int(np.random.SeedSequence([abs(int(p)) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def group_metrics(groups: Sequence[Sequence[Rollout]], prefix: str = "") -> dict[str, float]:
    rollouts = [r for g in groups for r in g]
    steps = [s for r in rollouts for s in r.steps]
    if not rollouts:
        return {}
    trca = [r.r_TRCA for r in (step_records(s).trca() for s in steps) if r is not None]
    parsed = [s.action_tokens is not None for s in steps]
    out = {
        f"{prefix}success_rate": float(np.mean([r.success for r in rollouts])),
        f"{prefix}return_mean": float(np.mean([r.reward_return for r in rollouts])),
        f"{prefix}env_return_mean": float(np.mean([r.env_return for r in rollouts])),
        f"{prefix}episode_steps": float(np.mean([len(r.steps) for r in rollouts])),
        f"{prefix}action_parsed_rate": float(np.mean(parsed)) if parsed else 0.0,
        f"{prefix}response_tokens_mean": float(np.mean([len(s.response_ids) for s in steps])) if steps else 0.0,
        f"{prefix}rollout_errors": float(sum(r.error is not None for r in rollouts)),
        f"{prefix}distinct_group_share": distinct_group_share(groups),
    }
    if trca:
        out[f"{prefix}trca_reward_mean"] = float(np.mean(trca))
    return out


class Trainer:
    """Builds everything from a ``TrainConfig``; ``model``/``tokenizer``/``env_fn``/``judge``
    may be injected (tests, custom envs)."""

    def __init__(self, config: TrainConfig, run_dir: str | Path | None = None, *, model: Any = None,
                 tokenizer: Any = None, env_fn: Callable[[], Any] | None = None, judge: Any = None,
                 resume: bool = False):
        self.config = config
        # how the processes (torchrun / accelerate launch; one alone otherwise) share the model: chosen once
        self.parallel: ParallelStrategy = choose_strategy(
            config.run, cuda=not self._device_is_cpu(config), generation_backend=config.generation.backend,
            self_judge=config.judge.self_judge)
        self.ranks: Ranks = self.parallel.ranks
        if self.ranks.world_size > config.algorithm.tasks_per_iteration:
            raise ValueError(f"algorithm.tasks_per_iteration={config.algorithm.tasks_per_iteration} is below the "
                             f"{self.ranks.world_size} processes: each process rolls out whole groups")
        if self._device_is_cpu(config):
            torch.set_num_threads(config.run.threads or default_threads())
        # rank 0 names the run folder; every rank uses that name
        self.run_dir = Path(self.ranks.broadcast_json(str(run_dir) if run_dir else str(self._new_run_dir())))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        refuse_links_outside(self.run_dir)  # before anything loads: its files are written in place
        seed_everything(config.run.seed)
        self.device = self._device()
        # the env first: its id, data location and tasks are checked before the model loads
        self.max_steps, self.max_steps_source = config.env.step_budget()
        self.env_fn = env_fn or make_env_factory(config.env)
        first_env = self.env_fn()
        self.tasks = available_tasks(first_env, config.env)
        self.model, self.tokenizer = self._build_model(model, tokenizer)
        self.parallel.prepare_model(self.model, self.device)  # before the optimizer: it holds what this leaves
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.algorithm.lr, weight_decay=config.algorithm.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_lambda)
        self.parallel.prepare_optimizer(self.optimizer, config.algorithm.max_grad_norm)
        self.collector = build_collector(config.env, self.env_fn, self.tokenizer, config.prompt, self.max_steps,
                                         env_fn_injected=env_fn is not None, first_env=first_env)
        self.generator = self._build_generator()
        self.judge = judge if judge is not None else self._build_judge()
        self.iteration = 0  # completed iterations
        self.data_position = 0  # tasks drawn so far
        self.warmup_done = False  # the warm start runs once per run, never again on resume
        self.reference = KLReference()  # the KL term's: the base until a warm start, then the warm-started policy
        self._loggers = RunLoggers(config.run.loggers(), self.run_dir, self.run_dir.name,
                                   config.model_dump(mode="json"), asked=config.run.report_to is not None)
        if resume:
            self._resume()
        if self.ranks.is_main:
            atomic_write_text(self.run_dir / CONFIG_FILE, dump_config(config))

    # ---- construction ------------------------------------------------------------------
    @staticmethod
    def _device_is_cpu(config: TrainConfig) -> bool:
        return config.model.device == "cpu" or (config.model.device == "auto" and not torch.cuda.is_available())

    def _new_run_dir(self) -> Path:
        name = self.config.run.name or datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = Path(self.config.run.output_dir) / name
        k = 1
        while path.exists():
            k += 1
            path = Path(self.config.run.output_dir) / f"{name}-{k}"
        return path

    def _device(self) -> torch.device:
        want = self.config.model.device
        if want == "auto":
            want = "cuda" if torch.cuda.is_available() else "cpu"
        if want.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError("model.device is CUDA but no CUDA device is available")
        if want.startswith("cuda") and self.ranks.distributed:
            return self.ranks.device  # one GPU per process: cuda:LOCAL_RANK
        return torch.device(want)

    def _build_model(self, model: Any, tokenizer: Any) -> tuple[Any, Any]:
        cfg = self.config
        if model is None:
            model, tokenizer = load_causal_lm(cfg.model.name, device=str(self.device), dtype=cfg.model.dtype,
                                              seed=cfg.run.seed)
        elif tokenizer is None:
            raise ValueError("a model passed to Trainer needs its tokenizer too")
        model.to(self.device)
        use_ckpt = cfg.model.gradient_checkpointing
        if use_ckpt is None:
            use_ckpt = self.device.type == "cuda"
        if use_ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False
        lora = LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                          target_modules=list(cfg.lora.target_modules), task_type="CAUSAL_LM")
        peft_model = get_peft_model(model, lora)
        return peft_model, tokenizer

    def _build_generator(self) -> Any:
        gen = self.config.generation
        if gen.backend == "hf":
            return HFGenerator(self.model, self.tokenizer, gen, lockstep=self.parallel.lockstep)
        if gen.backend == "openai":
            return OpenAIServerGenerator(self.tokenizer, gen, self.model, self.run_dir / "server_adapters",
                                         seed=self.config.run.seed)
        base = getattr(self.model.base_model.model.config, "_name_or_path", "")
        return VLLMGenerator(base, self.tokenizer, gen, self.config.lora.r, self.run_dir / "vllm_adapters",
                             seed=self.config.run.seed)

    def _build_judge(self) -> Any:
        variant = self.config.estimator.judge_variant
        if variant is None:
            return None
        options = dict(self.config.judge.options)
        if self.config.judge.config:
            options = {**(read_yaml_file(self.config.judge.config) or {}), **options}
        judge_cfg = self.config.judge
        adapter = getattr(self.collector.env(0).unwrapped, "adapter", None)
        static = variant.startswith("static")
        if judge_cfg.static_rubric:
            rubric = load_rubric(judge_rubric_file(judge_cfg.static_rubric))
        elif static:  # the benchmark's packaged rubric; a clear error when it ships none
            rubric = load_rubric(judge_rubric_file(getattr(adapter, "benchmark", "")))
        else:
            rubric = None  # dynamic rubrics are written per group
        settings = JudgeSettings(**options)
        if judge_cfg.self_judge:
            # The policy judges its own rollouts, in process. Repeats must be able to differ,
            # so a zero temperature is raised to 1; the backend's model id names the policy
            # version (set per iteration) so cached verdicts of older weights are never reused.
            if settings.temperature <= 0:
                settings = settings.model_copy(update={"temperature": 1.0})
            backend = TransformersChatBackend(self.model, self.tokenizer, model_id=self._policy_id(0))
            return DracoJudge(backend, settings, static_rubric=rubric, self_judge=True)
        return DracoJudge.from_settings(settings, static_rubric=rubric)

    def _policy_id(self, iteration: int) -> str:
        return f"policy:{self.run_dir.name}:iter{iteration}"

    def _lr_lambda(self, step: int) -> float:
        alg = self.config.algorithm
        per_iter = alg.epochs * alg.minibatches
        warm = alg.warmup_iterations * per_iter
        if warm and step < warm:
            return (step + 1) / warm
        if alg.lr_schedule == "cosine":
            total = max(1, self.config.run.iterations * per_iter - warm)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / total)))
        return 1.0

    # ---- data --------------------------------------------------------------------------
    def tasks_for(self, position: int, count: int) -> list[tuple[str, int]]:
        """Tasks drawn at stream positions [position, position+count): a seeded permutation
        per pass over the task list; each draw has its own env seed (shared by its group)."""
        n = len(self.tasks)
        out = []
        for k in range(position, position + count):
            perm = np.random.default_rng(derive_seed(self.config.run.seed, k // n)).permutation(n)
            out.append((self.tasks[int(perm[k % n])], derive_seed(self.config.run.seed, 7919, k)))
        return out

    # ---- one iteration -----------------------------------------------------------------
    def rollouts(self, tasks: Sequence[tuple[str, int]], sample_seed: int,
                 timings: RolloutTimings) -> list[list[Rollout]]:
        torch.manual_seed(sample_seed)
        bar = None
        if self.config.run.progress:
            bar = tqdm(total=self.max_steps, desc=f"rollouts ({len(tasks)}x{self.config.algorithm.group_size})",
                       unit="turn", dynamic_ncols=True, leave=False)

        def tick(turn: int, active: int) -> None:
            if bar is not None:
                bar.update(1)
                bar.set_postfix({"playing": active})

        try:
            return self.collector.collect(self.generator, tasks, self.config.algorithm.group_size, timings,
                                          progress=tick)
        finally:
            if bar is not None:
                bar.close()

    def train_iteration(self) -> dict[str, float]:
        cfg = self.config
        it = self.iteration + 1
        started = time.perf_counter()
        # 1. rollouts: G per task, identical initial states, lockstep batched generation;
        #    several processes: each rank rolls out whole groups (tasks k = rank, rank + world, ...)
        tasks = self.tasks_for(self.data_position, cfg.algorithm.tasks_per_iteration)
        mine = self.ranks.share(len(tasks))
        timings = RolloutTimings()
        groups = self.rollouts([tasks[k] for k in mine], self._sample_seed(it), timings)
        for k, group in zip(mine, groups, strict=True):
            for rollout in group:
                rollout.group = k  # its task's index in the global batch
        # 2. credit: per-token advantages and masks, by the estimator resolved when the config loaded
        t0 = time.perf_counter()
        if cfg.judge.self_judge and self.judge is not None:
            self.judge.backend.model_id = self._policy_id(it)  # the weights that made these rollouts
        assign_advantages(groups, cfg.estimator, judge=self.judge, iteration=it)
        credit_s = time.perf_counter() - t0
        # 3. update: clipped surrogate + KL to the base + entropy bonus, aggregated as configured
        #    (several processes: global denominators, gradients summed over the ranks)
        t0 = time.perf_counter()
        samples = [s for i, r in enumerate(r for g in groups for r in g) for s in r.samples(i)]
        stats = self.update(samples, it)
        update_s = time.perf_counter() - t0
        self.generator.sync_weights(self.model, it)
        # 4. bookkeeping
        self.iteration = it
        self.data_position += len(tasks)
        total = time.perf_counter() - started
        metrics: dict[str, Any] = {"iteration": it, **self._rollout_metrics(groups), **stats,
                                   "lr": float(self.optimizer.param_groups[0]["lr"])}
        adv = [a for s in samples if s.loss_mask for a, m in zip(s.token_advantages or [], s.loss_mask) if m]
        metrics["advantage_abs_mean"] = float(np.mean(np.abs(adv))) if adv else 0.0
        if self.ranks.distributed:  # the slowest rank's times, every rank's tokens, the mean over all ranks' tokens
            adv_sum, adv_count, timings.response_tokens, timings.prompt_tokens = self.ranks.sum(
                [float(np.sum(np.abs(adv))), len(adv), timings.response_tokens, timings.prompt_tokens])
            metrics["advantage_abs_mean"] = adv_sum / adv_count if adv_count else 0.0
            (timings.generation, timings.environment, timings.tokenization, credit_s, update_s, total) = self.ranks.max(
                [timings.generation, timings.environment, timings.tokenization, credit_s, update_s, total])
            metrics["processes"] = self.ranks.world_size
            metrics.update(self.parallel.run_metrics())
        metrics.update({
            "time/generation_s": timings.generation, "time/environment_s": timings.environment,
            "time/tokenization_s": timings.tokenization, "time/credit_s": credit_s, "time/update_s": update_s,
            "time/iteration_s": total,
            "tokens/response": float(timings.response_tokens), "tokens/prompt": float(timings.prompt_tokens),
            "throughput/generation_tok_s": timings.response_tokens / max(timings.generation, 1e-9),
            "throughput/update_tok_s": stats.get("update_tokens", 0.0) / max(update_s, 1e-9),
        })
        if self.device.type == "cuda":
            metrics["memory/peak_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        self._log(metrics)
        if it % cfg.run.trajectories_every == 0:
            self._save_trajectories(groups, it)
        if it % cfg.run.checkpoint_every == 0 or it == cfg.run.iterations:
            self.save()
        if cfg.run.report_every and (it % cfg.run.report_every == 0 or it == cfg.run.iterations) and self.ranks.is_main:
            self.write_report()
        return metrics

    def _sample_seed(self, it: int) -> int:
        """The sampling seed of iteration ``it`` (each rank its own when there are several)."""
        if self.ranks.distributed:
            return derive_seed(self.config.run.seed, 104729, it, self.ranks.rank)
        return derive_seed(self.config.run.seed, 104729, it)

    def update(self, samples: Sequence[Any], it: int) -> dict[str, float]:
        """One policy update of iteration ``it`` on this rank's step samples (global statistics)."""
        gen = torch.Generator().manual_seed(derive_seed(self.config.run.seed, 15485863, it))
        return ppo_update(self.model, self.optimizer, self.scheduler, samples, self.config.algorithm,
                          self.config.estimator.objective, pad_id=self.pad_id,
                          temperature=self.config.generation.temperature, generator=gen,
                          parallel=self.parallel, reference=self.reference)

    def _rollout_metrics(self, groups: Sequence[Sequence[Rollout]]) -> dict[str, float]:
        """``group_metrics`` of the iteration's groups (on every rank: of all ranks' groups)."""
        if not self.ranks.distributed:
            return group_metrics(groups)
        steps = [s for g in groups for r in g for s in r.steps]
        counts = {"rollouts": sum(len(g) for g in groups), "steps": len(steps),
                  "trca_steps": sum(step_records(s).trca() is not None for s in steps),
                  "compared_groups": sum(len(g) >= 2 for g in groups)}
        return merge_rank_metrics(self.ranks.gather_json({"metrics": group_metrics(groups), "counts": counts}))

    def write_report(self) -> None:
        """The live view: refresh ``report.html`` in the run folder. A failing report is
        logged, never allowed to stop the training."""
        try:
            from rubricgym.report import write_report  # optional: the report extra

            write_report(self.run_dir, live=True)
        except Exception:
            log.exception("writing the run report failed (the run goes on)")

    # ---- held-out evaluation -----------------------------------------------------------
    @cached_property
    def held_out(self) -> Evaluator:
        """The evaluation plan and its envs (built on first use): the benchmark's held-out
        tasks, or the train tasks of RL iteration 1 when it declares none."""
        cfg = self.config
        return build_evaluator(cfg, self.model, self.tokenizer, lambda k: derive_seed(cfg.run.seed, 4049, k),
                               lambda: self.tasks_for(0, cfg.algorithm.tasks_per_iteration), self.env_fn,
                               train_tasks=self.tasks, lockstep=self.parallel.lockstep)

    def eval_tasks(self) -> list[tuple[str, int]]:
        return list(self.held_out.plan.tasks)

    def evaluations(self) -> dict[str, Any]:
        """``evaluations.json``: label -> the full result (per task), kept across resumes."""
        path = self.run_dir / EVALUATIONS_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def evaluate_held_out(self, label: str, phase: str = "eval") -> EvalResult:
        """Evaluate on the plan's tasks (greedy, batched), record it and log its numbers."""
        result = self.held_out.run(label, derive_seed(self.config.run.seed, 104729, 1),
                                   self.config.run.progress and self.ranks.is_main)
        if self.ranks.is_main:  # every rank evaluates the same weights; rank 0 writes
            record = self.evaluations()
            record[label] = result.model_dump(mode="json")
            atomic_write_text(self.run_dir / EVALUATIONS_FILE, json.dumps(record, indent=2))
            self.held_out.save_trajectories(self.run_dir / "evaluations" / f"{label}.jsonl")
        self._log({"phase": phase, "iteration": self.iteration, "eval": label,
                   **{k: v for k, v in result.metrics().items() if isinstance(v, (int, float))}})
        return result

    # ---- format warm-up (once, before RL) ------------------------------------------------
    def warmup_wanted(self) -> bool:
        enabled = self.config.warmup.enabled
        if enabled is None:
            return has_expert(self.collector.env(0))
        return enabled

    def warm_start(self) -> dict[str, Any]:
        """Evaluate, behaviour-clone the expert on train games that are never evaluated,
        evaluate again, checkpoint as iteration 0 (so --resume never repeats it)."""
        cfg = self.config
        plan = self.held_out.plan
        held = {t for t, _ in plan.tasks}
        games = [t for t in self.tasks if t not in held][: cfg.warmup.games]
        if not games:
            raise ValueError("the warm start needs train tasks other than the evaluation tasks; "
                             "lower algorithm.tasks_per_iteration or offer more tasks")
        record: dict[str, Any] = {"games": games, "eval_tasks": [t for t, _ in plan.tasks], "eval_split": plan.split}
        t0 = time.perf_counter()
        if cfg.warmup.evaluate:
            record["before"] = self.evaluate_held_out("before", phase="warmup").metrics()
        demos = collect_demonstrations(self.env_fn, self.tokenizer, cfg.prompt, games,
                                       derive_seed(cfg.run.seed, 31337), stop_token_ids(self.tokenizer, self.model),
                                       progress=cfg.run.progress, recoveries=cfg.warmup.recoveries,
                                       reasoning=cfg.warmup.reasoning)
        history = run_warmup(self.model, demos, cfg.warmup, self.pad_id, derive_seed(cfg.run.seed, 271828), self._log,
                             progress=cfg.run.progress, autocast=self.parallel.warm_start_autocast)
        record["dagger"] = []
        for round_ in range(1, cfg.warmup.dagger_rounds + 1):
            labels, dagger = self._dagger_round(games, round_)
            demos += labels
            history += run_warmup(self.model, demos, cfg.warmup, self.pad_id,
                                  derive_seed(cfg.run.seed, 271828, round_), self._log,
                                  progress=cfg.run.progress, autocast=self.parallel.warm_start_autocast)
            record["dagger"].append(dagger)
            self._log({"phase": "warmup", "iteration": 0, "dagger_round": round_,
                       "dagger_success": dagger["successes"] / max(dagger["episodes"], 1),
                       "dagger_labels": dagger["labels"]})
        self.parallel.align_after_warm_start(self.model)
        self.reference.capture(self.model, self.parallel)  # RL starts here: the KL term pulls back to this policy
        self.generator.sync_weights(self.model, 0)
        sources = Counter(d.source for d in demos)
        record.update({"demonstrations": len(demos), "recovery_demonstrations": sources["recovery"],
                       "dagger_demonstrations": sources["visited"],
                       "steps": len(history), "loss_first": history[0]["loss"],
                       "loss_last": history[-1]["loss"]})
        if cfg.warmup.evaluate:
            record["after"] = self.evaluate_held_out("after_warmup", phase="warmup").metrics()
            # how peaked the policy is where it acts: its own first step on every eval task
            firsts = [r.steps[0] for r in self.held_out.last_rollouts if r.steps]
            record["policy_entropy"] = policy_entropy(self.model, firsts, self.pad_id, cfg.generation.temperature,
                                                      cfg.algorithm.micro_batch_size)
            self._log({"phase": "warmup", "iteration": 0, "policy_entropy": record["policy_entropy"]})
        record["time_s"] = time.perf_counter() - t0
        self.warmup_done = True
        if self.ranks.is_main:  # one writer, as for every run file
            atomic_write_text(self.run_dir / WARMUP_FILE, json.dumps(record, indent=2))
        self.save()
        return record

    def _dagger_round(self, games: Sequence[str], round_: int) -> tuple[list[Demonstration], dict[str, int]]:
        """The current policy, sampled as in RL, once on each demonstration game, in envs of its
        own (closed afterwards, as the demonstrations' are); the expert's labels of the states it
        reached, and the round's record."""
        cfg = self.config
        self.generator.sync_weights(self.model, 0)
        collector = RolloutCollector(self.env_fn, self.tokenizer, cfg.prompt, self.max_steps)
        tasks = [(g, derive_seed(cfg.run.seed, 65537, round_, k)) for k, g in enumerate(games)]
        torch.manual_seed(derive_seed(cfg.run.seed, 65537, round_))
        try:
            played = [r for g in collector.collect(self.generator, tasks, 1) for r in g if r.error is None]
        finally:
            collector.close()
        labels = label_visited_states(self.env_fn, self.tokenizer, cfg.prompt,
                                      [(r.task_id, r.seed, [s.response_text for s in r.steps]) for r in played],
                                      stop_token_ids(self.tokenizer, self.model), progress=cfg.run.progress,
                                      reasoning=cfg.warmup.reasoning)
        return labels, {"round": round_, "episodes": len(played), "successes": sum(r.success for r in played),
                        "labels": len(labels)}

    # ---- the whole run -----------------------------------------------------------------
    def train(self, stop_after: int | None = None, evaluate: bool | None = None) -> dict[str, Any]:
        """Run to ``run.iterations`` (or stop early after ``stop_after`` iterations, as a kill would)."""
        cfg = self.config
        bar = None
        if cfg.run.progress and self.ranks.is_main:
            bar = tqdm(total=cfg.run.iterations, initial=self.iteration, desc="train", unit="it", dynamic_ncols=True)
        done = 0
        started, load_start = time.perf_counter(), os.getloadavg()
        evaluate = cfg.run.evaluate_after if evaluate is None else evaluate
        if self.iteration == 0 and not self.warmup_done and self.warmup_wanted():
            self.warm_start()
        elif self.iteration == 0 and evaluate and not self.warmup_done and "before" not in self.evaluations():
            self.evaluate_held_out("before")  # after a warm start, "before" is the warm start's to record
        try:
            while self.iteration < cfg.run.iterations:
                m = self.train_iteration()
                done += 1
                if bar is not None:
                    bar.update(1)
                    post = {"reward": f"{m.get('return_mean', 0):.3f}", "success": f"{m.get('success_rate', 0):.2f}",
                            "kl": f"{m.get('kl', 0):.4f}"}
                    bar.set_postfix(post)
                if stop_after is not None and done >= stop_after:
                    return {"stopped_after": self.iteration, "run_dir": str(self.run_dir)}
        finally:
            if bar is not None:
                bar.close()
        summary = self.summary(evaluate)
        summary.update({"wall_s": time.perf_counter() - started, "load_average_start": list(load_start),
                        "load_average_end": list(os.getloadavg()), "torch_threads": torch.get_num_threads(),
                        "max_steps": self.max_steps, "max_steps_source": self.max_steps_source,
                        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        if self.ranks.is_main:
            write_run_file(self.run_dir / SUMMARY_FILE, json.dumps(summary, indent=2))
        if cfg.run.report_every and self.ranks.is_main:
            self.write_report()  # the final report, with the summary's evaluations
        return summary

    def evaluate(self, tasks: Sequence[tuple[str, int]], sample_seed: int) -> dict[str, float]:
        """Roll out the current policy on ``tasks`` (G per task, sampling as in training)
        without updating; the held-out evaluation is ``evaluate_held_out``."""
        timings = RolloutTimings()
        groups = self.rollouts(tasks, sample_seed, timings)
        return group_metrics(groups)

    def summary(self, evaluate: bool) -> dict[str, Any]:
        """The held-out evaluations before training, after the warm start and after RL
        (``evaluations.json`` has them per task), plus what was trained."""
        history = self.read_metrics()
        warm = self.warmup_record()
        plan = self.held_out.plan
        out: dict[str, Any] = {"run_dir": str(self.run_dir), "iterations": self.iteration,
                               "advantage": self.config.algorithm.advantage, "eval_split": plan.split,
                               "eval_held_out": plan.held_out, "eval_tasks": [t for t, _ in plan.tasks],
                               "eval_decoding": self.held_out.decoding}
        if warm is not None:
            out["warmup"] = {k: warm[k] for k in ("games", "demonstrations", "steps", "loss_first", "loss_last",
                                                   "policy_entropy", "time_s") if k in warm}
        if evaluate:
            self.evaluate_held_out("after")
        done = self.evaluations()
        for label in ("before", "after_warmup", "after"):
            if label in done:
                out[label] = EvalResult.model_validate(done[label]).metrics()
        out.update({"trained_samples": int(sum(m.get("trained_samples", 0) for m in history)),
                    "final_kl": history[-1].get("kl", 0.0) if history else 0.0,
                    "distinct_group_share": float(np.mean([m.get("distinct_group_share", 0.0) for m in history]))
                    if history else 0.0,
                    "rl_entropy_first": history[0].get("entropy") if history else None})
        latest = latest_checkpoint(self.run_dir)
        out["checkpoint"] = str(latest) if latest else None
        return out

    # ---- run files ---------------------------------------------------------------------
    def warmup_record(self) -> dict[str, Any] | None:
        path = self.run_dir / WARMUP_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def _log(self, metrics: dict[str, Any]) -> None:
        if not self.ranks.is_main:  # rank 0 writes the run files (metrics are already global)
            return
        append_run_line(self.run_dir / METRICS_FILE, json.dumps(metrics, sort_keys=True))
        self._loggers.log(metrics)  # run.report_to: TensorBoard, W&B, MLflow, the same names in each

    def read_metrics(self, phase: str | None = "rl") -> list[dict[str, Any]]:
        """Lines of one phase ("rl": the iterations; "warmup"), or all of them (None)."""
        lines = read_metrics_lines(self.run_dir / METRICS_FILE)
        return [m for m in lines if phase is None or m.get("phase", "rl") == phase]

    def _save_trajectories(self, groups: Sequence[Sequence[Rollout]], it: int) -> None:
        trajs = []
        for group in groups:
            for r in group:
                if r.trajectory is None:
                    continue
                meta = {**r.trajectory.meta, "iteration": it, "group": r.group, "member": r.member,
                        "success": r.success, "error": r.error,
                        "step_advantages": [max((a for a, m in zip(s.token_advantages or [], s.loss_mask or []) if m),
                                                key=abs, default=0.0) for s in r.steps],
                        "token_advantages": [[[self.tokenizer.decode([t]), a] for t, a, m in
                                              zip(s.response_ids, s.token_advantages or [], s.loss_mask or []) if m]
                                             for s in r.steps]}
                if r.judge is not None:
                    meta["judge"] = r.judge
                trajs.append(r.trajectory.model_copy(update={"meta": meta}))
        folder = self.run_dir / "trajectories"
        if not self.ranks.distributed:
            folder.mkdir(exist_ok=True)
            write_run_file(folder / f"iter-{it:06d}.jsonl", "".join(t.to_json_line() + "\n" for t in trajs))
            return
        # several processes: rank 0 writes every rank's, in the global batch's group order
        mine = [[t.meta["group"], t.meta["member"], t.to_json_line()] for t in trajs]
        gathered = sorted(row for part in self.ranks.gather_json(mine) for row in part)
        if self.ranks.is_main:
            folder.mkdir(exist_ok=True)
            write_run_file(folder / f"iter-{it:06d}.jsonl", "".join(line + "\n" for _, _, line in gathered))

    def save(self) -> Path | None:
        """Checkpoint the run. Several processes: every rank's RNG state goes to rank 0, which
        writes the one checkpoint (adapter and optimizer state are the same on every rank)."""
        snapshots = self.ranks.gather_json(rng_snapshot()) if self.ranks.distributed else []
        # a partitioned model or optimizer: every rank joins the gathering of the whole tensors; rank 0 writes them
        adapter, optimizer_state = self.parallel.full_adapter_state(), self.parallel.full_optimizer_state()
        if not self.ranks.is_main:
            return None
        extra = {"data_position": self.data_position, "warmup_done": self.warmup_done,
                 "config": self.config.model_dump(mode="json"), "loss_scale": self.parallel.loss_scale_state()}
        return save_checkpoint(self.run_dir, self.iteration, self.model, self.optimizer, self.scheduler, extra,
                               keep=self.config.run.keep_checkpoints, world_size=self.ranks.world_size,
                               rank_rng={r: snap for r, snap in enumerate(snapshots) if r > 0},
                               adapter_state=adapter, optimizer_state=optimizer_state,
                               reference_state=self.reference.state)

    def _resume(self) -> None:
        # the newest intact checkpoint (damaged newer ones are named in a warning, moved aside);
        # several processes: rank 0 chooses it, the other ranks restore the same one (and their own RNG)
        restored, error = None, None
        if self.ranks.is_main:
            try:
                restored = restore_latest(self.run_dir, self.model, self.optimizer, self.scheduler,
                                          parallel=self.parallel, reference=self.reference)
            except CheckpointError as exc:
                error = exc
        chosen = self.ranks.broadcast_json({"path": str(restored.path) if restored else None,
                                            "error": str(error) if error else None})
        if error is not None:
            raise error
        if chosen["error"]:
            raise CheckpointError(self.run_dir, f"rank 0 cannot resume: {chosen['error']}")
        if restored is None:
            restored = restore_checkpoint(Path(chosen["path"]), self.model, self.optimizer, self.scheduler,
                                          rank=self.ranks.rank, parallel=self.parallel, reference=self.reference)
        self.iteration = restored.iteration
        self.data_position = restored.data_position
        self._take_optimizer_settings_from_config()
        self.parallel.load_loss_scale_state(restored.state.loss_scale)
        self.warmup_done = restored.warmup_done or (self.run_dir / WARMUP_FILE).is_file()
        # metrics written after the checkpoint belong to iterations that will be redone
        if self.ranks.is_main:
            cut_metrics(self.run_dir / METRICS_FILE, self.iteration)
        self.generator.sync_weights(self.model, self.iteration)

    def _take_optimizer_settings_from_config(self) -> None:
        """A restored optimizer keeps its moments and step count but takes the learning rate and
        weight decay of the run's config: the saved ones are whatever the checkpoint's run used,
        so without this a ``--set algorithm.lr=...`` on resume (or a fork of a warm start) would
        be ignored without a word. Same config, same values: an exact resume stays exact."""
        alg = self.config.algorithm
        saved = {group["initial_lr"] for group in self.optimizer.param_groups if "initial_lr" in group}
        if saved and saved != {alg.lr}:
            log.info("resuming with algorithm.lr=%g (the checkpoint's optimizer had %s)",
                     alg.lr, ", ".join(f"{lr:g}" for lr in sorted(saved)))
        self.scheduler.base_lrs = [alg.lr for _ in self.optimizer.param_groups]
        factor = self._lr_lambda(self.scheduler.last_epoch)
        for group in self.optimizer.param_groups:
            group["initial_lr"], group["lr"], group["weight_decay"] = alg.lr, alg.lr * factor, alg.weight_decay

    def close(self) -> None:
        self.collector.close()
        if "held_out" in self.__dict__:  # built on first use
            self.held_out.close()
        self._loggers.close()
        self.parallel.close()
        self.ranks.close()

    @classmethod
    def from_run_dir(cls, run_dir: str | Path, overrides: list[str] | None = None, **kwargs: Any) -> Trainer:
        """Resume a run from its folder, with its own resolved config (plus overrides)."""
        run_dir = Path(run_dir)
        config = load_run_config(run_dir, CONFIG_FILE, overrides)
        return cls(config, run_dir, resume=True, **kwargs)
