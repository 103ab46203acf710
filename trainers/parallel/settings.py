"""The run config's parallel fields (``run.*``), kept beside the code that reads them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator


class ParallelSettings(BaseModel):
    """How the training processes share the model; ``RunSettings`` inherits these fields."""

    collective_timeout_s: float = Field(
        300.0, gt=0.0, description="several processes: a collective (gradient sum, gather) waiting longer than "
        "this for another rank fails, so the surviving ranks exit instead of hanging (docs/scale.md)")
    fsdp: bool = Field(False, description="several processes: shard the base model and the adapter over the ranks "
                       "with FSDP2 (torch fully_shard); also on when accelerate launches an FSDP config")
    deepspeed_zero: int | None = Field(
        None, ge=1, le=3, description="several processes: train through DeepSpeed's ZeRO at this stage (1: optimizer "
        "state, 2: and gradients, 3: and the model's weights partitioned over the ranks); also set when accelerate "
        "launches a DeepSpeed config (its zero_stage). Needs the deepspeed extra (docs/scale.md)")
    mixed_precision: Literal["no", "bf16", "fp16"] | None = Field(
        None, description="autocast precision of the training forwards (weights and optimizer state stay fp32); "
        "default: the accelerate config's, else 'no'. fp16 scales the loss; replicated ranks only (docs/scale.md)")
    accelerate_config: str | None = Field(
        None, description="a config file written by `accelerate config`: its distributed type, ZeRO stage and mixed "
        "precision apply as when `accelerate launch --config_file` starts the run")

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: object) -> object:
        return "no" if value is False else value  # YAML reads an unquoted `no` as false

    @model_validator(mode="after")
    def _one_sharding(self) -> ParallelSettings:
        if self.fsdp and self.deepspeed_zero is not None:
            raise ValueError("run.fsdp and run.deepspeed_zero both shard the model; choose one")
        return self
