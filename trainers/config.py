"""One pydantic config for a training run: embedded defaults, a YAML file, CLI overrides.

The defaults ARE the main job (``rubricgym train`` with no arguments): SmolLM2-135M,
TRCA rewards on the bundled ALFWorld games, a few CPU-sized iterations.
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from rubricgym.env_factories import check_factory_name
from rubricgym.estimators import OutcomeRule, ResolvedEstimator, estimator_names, resolve_estimator
from rubricgym.prompts import PromptSettings
from rubricgym.registration import UnknownBenchmark, check_env_id, get_spec
from rubricgym.secret_refs import refuse_inline_secrets
from rubricgym.trainers.parallel.settings import ParallelSettings
from rubricgym.yaml_files import parse_yaml, read_yaml_file


class _Section(BaseModel):
    # errors never echo input values: a refused secret must not be printed or logged
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class ModelSettings(_Section):
    name: str = Field("smollm2", description="'smollm2', 'tiny', or a local transformers folder")
    device: str = Field("auto", description="'auto' (CUDA when available), 'cpu', 'cuda', 'cuda:1'")
    dtype: str = Field("auto", description="'auto' (bf16 on CUDA, float32 on CPU), 'float32', 'bfloat16'")
    gradient_checkpointing: bool | None = Field(None, description="default: on for CUDA, off on CPU")


class LoraSettings(_Section):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


DEFAULT_ENV_ID = "ALFWorld-Rubric-v0"
"""The main job's env (the one benchmark name the trainer defaults to)."""
MAIN_JOB_MAX_STEPS = 10
"""The main job's step budget: its expert plans take 3-9 steps."""


class EnvSettings(_Section):
    id: str = Field(DEFAULT_ENV_ID, description="a gymnasium id of a rubricgym env")
    factory: str | None = Field(None, description="the name of a registered env factory (rubricgym.register_env_factory "
                                "or an installed package's entry point); overrides id. Never an import path")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to gym.make / the factory")
    max_steps: int | None = Field(
        None, ge=1, description="step budget per episode; default: the benchmark spec's. Without env.id (the main "
        f"job, or an env.factory) it is {MAIN_JOB_MAX_STEPS}: the main job's expert plans take 3-9 steps")
    tasks: list[str] | None = Field(None, description="task ids to train on (default: all the env offers)")
    num_tasks: int | None = Field(None, ge=1, description="use only the first N task ids")
    workers: int = Field(0, ge=0, description="0: envs step in the trainer's process; N: N env worker processes "
                         "(Ray actors, else a local process pool) step all active rollouts concurrently")
    worker_backend: Literal["auto", "ray", "process"] = Field(
        "auto", description="'auto': Ray when installed, else a local process pool (docs/scale.md)")
    worker_timeout_s: float = Field(600.0, gt=0.0, description="a worker call past this ends its rollouts as failed")
    ray_address: str | None = Field(None, description="Ray cluster address (default: a local Ray instance)")
    url: str | None = Field(None, description="play env.id served by `rubricgym serve-env` at this URL (docs/remote.md); "
                            "the server holds the env's kwargs and step budget (start it with --max-steps)")

    @field_validator("id")
    @classmethod
    def _registered(cls, value: str) -> str:
        try:  # an unknown id fails here, with the nearest ids, before any model loads
            return check_env_id(value)
        except LookupError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("factory")
    @classmethod
    def _factory_name(cls, value: str | None) -> str | None:
        # a name, never 'module:callable': a config or run folder must not choose code to import
        return None if value is None else check_factory_name(value)

    @model_validator(mode="before")
    @classmethod
    def _main_job_budget(cls, data: Any) -> Any:
        if isinstance(data, dict) and not {"id", "max_steps"} & data.keys():
            return {**data, "max_steps": MAIN_JOB_MAX_STEPS}
        return data

    @model_validator(mode="after")
    def _served(self) -> EnvSettings:
        if self.url and (self.kwargs or self.factory):
            raise ValueError("env.url plays a served env: its kwargs are the server's (rubricgym serve-env --kwargs), "
                             "and env.factory cannot be served; leave env.kwargs and env.factory unset")
        return self

    def step_budget(self) -> tuple[int, Literal["config", "spec"]]:
        """The episode step budget and where it comes from: ``max_steps``, else the spec's."""
        if self.max_steps is not None:
            return self.max_steps, "config"
        if self.factory:
            raise ValueError("env.factory needs env.max_steps: there is no benchmark spec to take it from")
        return get_spec(self.id).max_steps, "spec"


class GenerationSettings(_Section):
    backend: Literal["hf", "vllm", "openai"] = "hf"
    server_url: str | None = Field(None, description="'openai' backend: the server's base URL (e.g. http://127.0.0.1:8000/v1)")
    server_model: str = Field("default", description="'openai' backend: the served model name")
    server_prompt: Literal["text", "ids"] = Field(
        "text", description="'openai' backend: send prompts as text (llama.cpp) or token ids (vLLM, SGLang)")
    server_lora: bool = Field(False, description="'openai' backend: load the adapter after each update "
                              "(vLLM's /v1/load_lora_adapter; unverified)")
    server_concurrency: int = Field(8, ge=1, description="'openai' backend: requests in flight")
    server_timeout_s: float = Field(300.0, gt=0.0)
    server_api_key_env: str | None = Field(
        None, description="'openai' backend: the environment variable holding the server's API key; none is sent "
        "unless named (a local generation server needs none)")
    server_max_reply_bytes: int = Field(16 << 20, ge=1024, description="'openai' backend: the largest reply read")
    max_new_tokens: int = Field(48, ge=1)
    temperature: float = Field(1.0, gt=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    batch_size: int = Field(0, ge=0, description="prompts per generate call (0: all active rollouts)")
    vllm_gpu_memory_utilization: float = Field(0.35, gt=0.0, le=1.0)


class AlgorithmSettings(_Section):
    advantage: str = Field("trca", description="the advantage estimator: " + " | ".join(estimator_names())
                           + " (docs/trainer.md's table; rubricgym.estimators.register_estimator adds one)")
    group_size: int = Field(4, ge=1, description="G rollouts per task, identical initial state")
    tasks_per_iteration: int = Field(1, ge=1)
    lr: float = Field(5e-5, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    warmup_iterations: int = Field(0, ge=0)
    lr_schedule: Literal["constant", "cosine"] = "constant"
    clip_low: float = Field(0.20, ge=0.0)
    clip_high: float = Field(0.28, ge=0.0)
    ratio_level: Literal["token", "action"] | None = Field(
        None, description="importance ratio per token, or per action (exp of its summed token log-ratios); "
        "default: the estimator's (TRCA: action, as in the paper)")
    loss_aggregation: Literal["token_mean", "step_mean", "rollout_mean_step_mean"] | None = Field(
        None, description="how token losses are averaged (docs/design.md §6); default: the estimator's "
        "(TRCA: rollout_mean_step_mean, the paper's 1/N sum_i 1/T_i sum_t)")
    kl_coef: float = Field(0.012, ge=0.0)
    entropy_coef: float = Field(0.001, ge=0.0)
    epochs: int = Field(1, ge=1, description="passes over each iteration's samples")
    minibatches: int = Field(1, ge=1, description="optimizer steps per epoch")
    micro_batch_size: int = Field(4, ge=1, description="sequences per forward/backward (gradient accumulation)")
    max_grad_norm: float = Field(1.0, gt=0.0)
    gamma: float | None = Field(
        None, gt=0.0, le=1.0,
        description="the discount of TRCA's completion-aware return and GiGPO's step return; default: the "
        "operator library's gamma, else 0.95 (a value here overrides it, with a warning when they differ)")
    trca_lambda: float | None = Field(
        None, ge=0.0, le=1.0, description="re-mix r_F/r_B (default: the r_TRCA the reward paid, i.e. the library's "
        "lambda; the TRCA ablations fix their own)")
    outcome: OutcomeRule | None = Field(
        None, description="what A_E standardizes: 'return' (the summed engine reward) or 'success' (the papers' "
        "binary outcome); default: the benchmark's (BenchmarkSpec.outcome; where the engine pays 1 for a win and 0 "
        "otherwise both agree)")
    eps: float = Field(1e-6, gt=0.0)
    skip_zero_advantage: bool | None = Field(
        None, description="drop samples whose trained tokens all have advantage 0; default: the estimator's "
        "(TRCA and DRACO: keep them, as TRCA's Eq. 22 counts them; GRPO, RLOO, GiGPO: drop them)")


DemonstrationReasoning = Literal["action", "task"]
"""What a demonstration's reasoning says before its action: ``action`` restates the action alone;
``task`` first restates the task ("My task is to: ..."), so the words that decide which action
is right (the object a task names) are the last ones the policy writes before it acts."""


class WarmupSettings(_Section):
    """Supervised format warm-up on expert demonstrations, once, before the RL iterations."""

    enabled: bool | None = Field(
        None, description="None: on when the env's adapter offers expert_plan(); true: required; false: off")
    games: int = Field(24, ge=1, description="train tasks whose expert plans are demonstrated (never the eval tasks)")
    recoveries: int = Field(
        0, ge=0, description="per game, extra replays with one random off-plan action, then the expert's replan "
        "from there (only those steps are demonstrations): the policy sees how to recover from a wrong step")
    dagger_rounds: int = Field(
        0, ge=0, description="DAgger rounds after the cloning: the policy plays the demonstration games (sampled), "
        "the expert labels every state it reached, and `steps` more steps train on all demonstrations so far")
    reasoning: DemonstrationReasoning = Field(
        "action", description="what each demonstration's reasoning says: 'action' restates the action; 'task' "
        "first restates the task, so the policy writes the object the task names just before it acts")
    steps: int = Field(32, ge=1, description="optimizer steps (under one pass: the policy must keep room to explore)")
    batch_size: int = Field(4, ge=1, description="demonstrations per optimizer step")
    micro_batch_size: int = Field(4, ge=1)
    lr: float = Field(1e-3, gt=0.0)
    max_grad_norm: float = Field(1.0, gt=0.0)
    evaluate: bool = Field(True, description="evaluate the policy before and after the warm start")


class EvaluationSettings(_Section):
    """Held-out evaluation before training, after the warm start and after RL (greedy, batched)."""

    env_id: str | None = Field(
        None, description="env id of the held-out tasks (default: the eval_id the benchmark's spec pairs with "
        "env.id; without one, the train tasks of RL iteration 1, marked as not held out)")
    tasks: list[str] | None = Field(None, description="task ids to evaluate (default: all the held-out env offers)")
    num_tasks: int | None = Field(None, ge=1, description="evaluate only the first N task ids")
    greedy: bool = Field(True, description="greedy decoding (false: sample as in training)")
    env_kwargs: dict[str, Any] | None = Field(
        None, description="kwargs for the held-out env (default: env.kwargs, so a training data_path is "
        "evaluated from the same data; set {} to evaluate the benchmark's bundled held-out tasks instead)")


class JudgeSettings(_Section):
    """Only read by the DRACO estimators (see docs/judge.md for the judge itself)."""

    config: str | None = Field(None, description="YAML file of rubricgym.judges settings")
    static_rubric: str | None = Field(
        None, description="rubric file or packaged name for the static variants (default: the benchmark's own)")
    self_judge: bool = Field(False, description="the policy model judges its own rollouts (k repeats)")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="inline judge settings; never a key: name it with api_key_env / api_key_file")

    @field_validator("options")
    @classmethod
    def _no_inline_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        # the config is written to the run folder (config.yaml, checkpoints): keys stay out
        refuse_inline_secrets(value, "judge.options", prefix="judge.options.")
        return value


class RunSettings(_Section, ParallelSettings):
    """Where the run's files go and how it runs; the parallel fields are ``ParallelSettings``."""

    output_dir: str = "runs"
    name: str | None = Field(None, description="run folder name (default: a timestamp)")
    iterations: int = Field(3, ge=1)
    seed: int = 0
    checkpoint_every: int = Field(1, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    trajectories_every: int = Field(1, ge=1, description="write sampled trajectories every N iterations")
    report_every: int = Field(0, ge=0, description="refresh the run folder's report.html every N iterations (0: off)")
    evaluate_after: bool = Field(True, description="evaluate on the held-out tasks before and after training "
                                 "(see the evaluation section)")
    tensorboard: bool = True
    report_to: list[str] | None = Field(None, description="where metrics go besides metrics.jsonl, TRL's names: "
                                        "tensorboard, wandb, mlflow, all or none (unset: tensorboard when "
                                        "run.tensorboard); see docs/trainer.md, 'Run loggers'")
    progress: bool = True
    threads: int | None = Field(None, ge=1, description="torch CPU threads (default: the usable CPUs, at most 2)")

    @field_validator("report_to", mode="before")
    @classmethod
    def _known_loggers(cls, value: Any) -> Any:
        from rubricgym.trainers.run_loggers import check_report_to  # stdlib only: the libraries load on use

        return value if value is None else check_report_to(value)

    def loggers(self) -> list[str]:
        """The loggers this run reports to: ``report_to``, else TensorBoard when ``tensorboard``."""
        return list(self.report_to) if self.report_to is not None else ["tensorboard"] if self.tensorboard else []


ALGORITHM_SETTING_NAMES = {"gamma": "algorithm.gamma", "lam": "algorithm.trca_lambda", "outcome": "algorithm.outcome",
                           "ratio_level": "algorithm.ratio_level", "loss_aggregation": "algorithm.loss_aggregation",
                           "skip_zero_advantage": "algorithm.skip_zero_advantage"}


def benchmark_outcome(env: EnvSettings) -> OutcomeRule | None:
    """The outcome rule the env's benchmark declares (None for a factory-made env)."""
    if env.factory:
        return None
    try:
        return get_spec(env.id).outcome
    except UnknownBenchmark:
        return None


class TrainConfig(_Section):
    model: ModelSettings = Field(default_factory=ModelSettings)
    lora: LoraSettings = Field(default_factory=LoraSettings)
    env: EnvSettings = Field(default_factory=EnvSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    algorithm: AlgorithmSettings = Field(default_factory=AlgorithmSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    warmup: WarmupSettings = Field(default_factory=WarmupSettings)
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    _estimator: ResolvedEstimator = PrivateAttr()

    @model_validator(mode="after")
    def _resolve_estimator(self) -> TrainConfig:
        # the one resolution of the run's estimator: an unknown name fails here, with the known ones
        alg = self.algorithm
        self._estimator = resolve_estimator(
            alg.advantage, gamma=alg.gamma, lam=alg.trca_lambda, eps=alg.eps, outcome=alg.outcome,
            benchmark_outcome=benchmark_outcome(self.env), ratio_level=alg.ratio_level,
            loss_aggregation=alg.loss_aggregation, skip_zero_advantage=alg.skip_zero_advantage,
            setting_names=ALGORITHM_SETTING_NAMES)
        return self

    @property
    def estimator(self) -> ResolvedEstimator:
        """The run's estimator, resolved once when the config was validated."""
        return self._estimator

    @model_validator(mode="before")
    @classmethod
    def _no_secrets_anywhere(cls, data: Any) -> Any:
        # the whole config is written to the run folder: no section may hold a key
        # (env.kwargs, generation.server_url with user-info, a key given as a variable's name)
        if isinstance(data, dict):
            refuse_inline_secrets(data, "config")
        return data


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ValueError(f"--set {key}: {part!r} is not a section")
        node = child
    node[parts[-1]] = value


def parse_override(item: str) -> tuple[str, Any]:
    """``"algorithm.group_size=8"`` -> ("algorithm.group_size", 8); values are YAML scalars/lists."""
    if "=" not in item:
        raise ValueError(f"override {item!r} is not KEY=VALUE (e.g. algorithm.group_size=8)")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise ValueError(f"override {item!r} has an empty key")
    value = parse_yaml(raw, f"override {item!r}") if raw.strip() else ""
    return key, value


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                base: dict[str, Any] | None = None) -> TrainConfig:
    """Defaults <- ``base`` <- YAML file <- ``--set`` overrides, validated once at the end."""
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        loaded = read_yaml_file(path) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config file must be a mapping of sections")
        data = _merge(data, loaded)
    for item in overrides or []:
        key, value = parse_override(item)
        _set_dotted(data, key, value)
    unknown = unknown_settings(TrainConfig, data)
    if unknown:
        raise ValueError("; ".join(unknown))
    return TrainConfig.model_validate(data)


def unknown_settings(model: type[BaseModel], data: dict[str, Any], prefix: str = "",
                     root: type[BaseModel] | None = None) -> list[str]:
    """Every key of ``data`` that ``model`` does not define, each with the nearest valid keys
    across all sections (``lr`` -> ``algorithm.lr``; pydantic would only say "extra inputs are
    not permitted")."""
    root = root or model
    out = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            valid = sorted(model.model_fields)
            near = nearest_settings(root, prefix, str(key))
            hint = f"did you mean {', '.join(near)}? " if near else ""
            where = f"settings of {prefix.rstrip('.')}" if prefix else "sections"
            out.append(f"unknown setting {prefix + str(key)!r}: {hint}valid {where}: {', '.join(valid)}")
        elif isinstance(value, dict) and (section := _section_model(field.annotation)) is not None:
            out += unknown_settings(section, value, f"{prefix}{key}.", root)
    return out


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (``X`` or ``X | None``), else None."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def setting_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key ``model`` accepts, sections and their settings."""
    paths = []
    for name, field in model.model_fields.items():
        paths.append(prefix + name)
        section = _section_model(field.annotation)
        if section is not None:
            paths += setting_paths(section, f"{prefix}{name}.")
    return paths


def nearest_settings(root: type[BaseModel], prefix: str, key: str, count: int = 3) -> list[str]:
    """The dotted keys a mistyped ``prefix + key`` most likely meant: a setting of that exact
    name in any section first (``lr`` -> ``algorithm.lr``), then close names in its own
    section, then close names anywhere."""
    paths = setting_paths(root)
    exact = [p for p in paths if p.rpartition(".")[2] == key and p != prefix + key]
    if exact:
        return exact[:count]
    here = [p for p in paths if p.rpartition(".")[0] == prefix.rstrip(".")]
    local = [prefix + n for n in difflib.get_close_matches(key, [p.rpartition(".")[2] for p in here], n=count,
                                                            cutoff=0.5)]
    by_name = {p.rpartition(".")[2]: p for p in reversed(paths)}
    anywhere = [by_name[n] for n in difflib.get_close_matches(key, list(by_name), n=count, cutoff=0.75)]
    return list(dict.fromkeys(local + anywhere))[:count]


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def dump_config(config: TrainConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
