"""Which parallel strategy a run asks for: from the run config, an ``accelerate config`` file
(``run.accelerate_config``, read with accelerate's own loader) and the variables
``accelerate launch`` sets. One place decides, before anything loads; what the trainer cannot
apply (Megatron-LM, offloading, a DeepSpeed config file, fp16) is refused with the reason,
never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Engine = Literal["replicated", "fsdp", "zero"]
Precision = Literal["no", "bf16", "fp16"]

# What ``accelerate launch`` sets for a config with a sharding plugin. FSDP and DeepSpeed ZeRO are
# driven by the trainer itself; Megatron-LM would silently shard nothing, so it is refused.
FSDP_LAUNCH_VARIABLE = "ACCELERATE_USE_FSDP"
DEEPSPEED_LAUNCH_VARIABLE = "ACCELERATE_USE_DEEPSPEED"
ZERO_STAGE_LAUNCH_VARIABLE = "ACCELERATE_DEEPSPEED_ZERO_STAGE"
MIXED_PRECISION_LAUNCH_VARIABLE = "ACCELERATE_MIXED_PRECISION"
UNSUPPORTED_LAUNCH_VARIABLES = {"ACCELERATE_USE_MEGATRON_LM": "Megatron-LM"}
OFFLOAD_REASON = ("the trainer keeps every tensor on the training device: offloading needs the engine's own "
                  "offload state in checkpoints, which are never written (pickle-free checkpoints hold only "
                  "the adapter and AdamW state)")
# DeepSpeed and FSDP settings of an accelerate config that the trainer does not apply: refused, not ignored
UNSUPPORTED_ENGINE_VARIABLES = {
    "ACCELERATE_DEEPSPEED_CONFIG_FILE": "a DeepSpeed config file (the trainer builds the DeepSpeed config from the "
                                        "run config: stage, gradient clipping)",
    "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE": f"offloading the optimizer state: {OFFLOAD_REASON}",
    "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE": f"offloading the parameters: {OFFLOAD_REASON}",
    "FSDP_OFFLOAD_PARAMS": f"offloading the parameters: {OFFLOAD_REASON}",
}
FP16_REASON = ("fp16 trains only with loss scaling; the trainer scales the loss itself (torch's GradScaler, whose "
               "state its checkpoints keep) for replicated ranks, while FSDP's sharded gradients would need a "
               "sharded scaler and DeepSpeed its own fp16 engine config; use bf16 or replicated ranks")
ZERO_PRECISION_REASON = ("DeepSpeed applies mixed precision through its own config (a bf16 section with master "
                         "weights), which the trainer does not build; use bf16 replicated or with FSDP")


class ParallelRefused(NotImplementedError):
    """A parallel or precision setting the trainer cannot apply; says why and what to use."""


@dataclass(frozen=True)
class LaunchRequest:
    """What one source (the launcher's variables, or an accelerate config file) asks for."""

    fsdp: bool = False
    zero_stage: int | None = None
    mixed_precision: str | None = None  # "no", "bf16", "fp16"; None: not said


@dataclass(frozen=True)
class ParallelPlan:
    """The decision: the engine, its ZeRO stage and the autocast precision."""

    engine: Engine = "replicated"
    zero_stage: int | None = None
    mixed_precision: Precision = "no"


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


def _zero_stage(raw: Any, where: str) -> int:
    text = str(raw).strip() or "2"
    if text not in ("1", "2", "3"):
        raise ParallelRefused(f"{where} asks for ZeRO stage {text!r}; the trainer runs stages 1, 2 and 3 (stage 0 is "
                              "plain data parallel: configs/accelerate/ddp.yaml)")
    return int(text)


def launch_request(environ: Mapping[str, str]) -> LaunchRequest:
    """What the launcher's environment asks for; ``ParallelRefused`` for Megatron-LM and for
    engine settings the trainer does not apply (a DeepSpeed config file, offloading, stage 0)."""
    asked = [name for var, name in UNSUPPORTED_LAUNCH_VARIABLES.items() if _flag(environ.get(var, ""))]
    if asked:
        raise ParallelRefused(
            f"the accelerate config asks for {' and '.join(asked)}, which rubricgym's trainer does not support: it "
            "drives the model itself (replicated, sharded with FSDP, or through DeepSpeed ZeRO), so nothing would "
            "be sharded; launch with configs/accelerate/ddp.yaml, fsdp.yaml or deepspeed_zero2.yaml (docs/scale.md)")
    for var, what in UNSUPPORTED_ENGINE_VARIABLES.items():
        value = environ.get(var, "").strip().lower()
        if value and value not in ("none", "false", "0"):
            raise ParallelRefused(f"the accelerate config asks for {what} ({var}={environ[var]!r}); remove it "
                                  "(docs/scale.md)")
    precision = environ.get(MIXED_PRECISION_LAUNCH_VARIABLE) or None
    if _flag(environ.get(DEEPSPEED_LAUNCH_VARIABLE, "")):
        stage = _zero_stage(environ.get(ZERO_STAGE_LAUNCH_VARIABLE, ""), "the accelerate DeepSpeed config")
        return LaunchRequest(zero_stage=stage, mixed_precision=precision)
    return LaunchRequest(fsdp=_flag(environ.get(FSDP_LAUNCH_VARIABLE, "")), mixed_precision=precision)


def accelerate_config_request(path: str | Path) -> LaunchRequest:
    """What a config file written by ``accelerate config`` asks for, read with accelerate's own
    loader (YAML or JSON, safe-loaded); the same refusals as for the launcher's variables."""
    from accelerate.commands.config.config_args import load_config_from_file  # optional: the train extra

    where = f"the accelerate config {path}"
    try:
        config = load_config_from_file(str(path))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{where} cannot be read: {exc}") from None
    kind = str(getattr(config, "distributed_type", "NO")).rsplit(".", 1)[-1].upper()
    precision = str(getattr(config, "mixed_precision", "no") or "no").rsplit(".", 1)[-1].lower()
    if kind == "MEGATRON_LM":
        raise ParallelRefused(f"{where} asks for Megatron-LM, which rubricgym's trainer does not support (docs/scale.md)")
    if kind == "FSDP":
        fsdp = dict(getattr(config, "fsdp_config", None) or {})
        if _flag(fsdp.get("fsdp_offload_params", False)):
            raise ParallelRefused(f"{where} asks for offloading the parameters (fsdp_offload_params: true): "
                                  f"{OFFLOAD_REASON}; remove it (docs/scale.md)")
        return LaunchRequest(fsdp=True, mixed_precision=precision)
    if kind == "DEEPSPEED":
        ds = dict(getattr(config, "deepspeed_config", None) or {})
        if ds.get("deepspeed_config_file"):
            raise ParallelRefused(f"{where} names a DeepSpeed config file; the trainer builds the DeepSpeed config "
                                  "from the run config (stage, gradient clipping) (docs/scale.md)")
        for key in ("offload_optimizer_device", "offload_param_device"):
            value = str(ds.get(key, "none") or "none").lower()
            if value != "none":
                raise ParallelRefused(f"{where} asks for {key}: {value}: {OFFLOAD_REASON}; remove it (docs/scale.md)")
        return LaunchRequest(zero_stage=_zero_stage(ds.get("zero_stage", 2), where), mixed_precision=precision)
    return LaunchRequest(mixed_precision=precision)


def choose_plan(fsdp: bool, zero_stage: int | None, mixed_precision: str | None, accelerate_config: str | None,
                environ: Mapping[str, str]) -> ParallelPlan:
    """The one decision, from the run config's ``run.fsdp`` / ``run.deepspeed_zero`` /
    ``run.mixed_precision`` / ``run.accelerate_config`` and the launcher's environment. The
    run config's precision wins; otherwise the accelerate config file's, then the launcher's."""
    sources = [launch_request(environ)]
    if accelerate_config:
        sources.append(accelerate_config_request(accelerate_config))
    fsdp = fsdp or any(s.fsdp for s in sources)
    stages = {s for s in (zero_stage, *(s.zero_stage for s in sources)) if s is not None}
    if len(stages) > 1:
        raise ValueError(f"DeepSpeed ZeRO stages {sorted(stages)} asked for by the run config and the accelerate "
                         "config; choose one")
    stage = next(iter(stages), None)
    if fsdp and stage is not None:
        raise ValueError("FSDP and DeepSpeed ZeRO both asked for (run config or accelerate config); choose one")
    said = [p for p in (mixed_precision, *(s.mixed_precision for s in reversed(sources))) if p]
    precision = (said[0] if said else "no").lower()
    if precision not in ("no", "bf16", "fp16"):
        raise ParallelRefused(f"mixed precision {precision!r}: the trainer runs 'no', 'bf16' and 'fp16'")
    if precision == "fp16" and (fsdp or stage is not None):
        raise ParallelRefused(f"mixed precision fp16 with {'FSDP' if fsdp else 'DeepSpeed ZeRO'}: {FP16_REASON}")
    if precision == "bf16" and stage is not None:
        raise ParallelRefused(f"mixed precision bf16 with DeepSpeed ZeRO: {ZERO_PRECISION_REASON}")
    engine: Engine = "fsdp" if fsdp else "zero" if stage is not None else "replicated"
    return ParallelPlan(engine=engine, zero_stage=stage, mixed_precision=precision)  # type: ignore[arg-type]
