"""What answers in an eval: ``PolicySpec`` and the policy it builds.

Policies (``--policy``): ``endpoint`` (an OpenAI-compatible chat endpoint; the key only by
reference, ``--api-key-env`` / ``--api-key-file``, as the judge), ``local`` (a model through
``rubricgym.models``: ``smollm2``, ``tiny`` or a folder), ``callable`` (``--callable
module:function``, a user's own agent: called with the chat messages so far, a list of
``{"role", "content"}`` dicts, and returning the response text; it may accept ``env_id`` and
``task_id`` keywords), ``adapter`` (``--adapter RUN_DIR``: a training run's LoRA weights on
its base model, through the pickle-free checkpoint reader). The prompt is the trainer's for
that env (``rubricgym.prompts``, chat style); the transcript sent is stored with each episode.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubricgym.secret_refs import refuse_inline_secrets
from rubricgym.tool_surface import ToolSpec
from rubricgym.trainers.preflight import import_callable


class PolicySpec(BaseModel):
    """What answers: everything a worker process needs to build the policy (no key: only where
    to read it)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["endpoint", "local", "callable", "adapter", "agent"] = Field(
        ..., description="'agent': an object in this process (rubricgym.evaluate; callable holds its name)")
    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str | None = None
    callable: str | None = Field(None, description="module:function (policy 'callable')")
    local_model: str = Field("smollm2", description="policy 'local': smollm2, tiny, or a model folder")
    adapter: str | None = Field(None, description="policy 'adapter': a training run folder (its newest intact checkpoint)")
    temperature: float = 0.0
    max_tokens: int = Field(256, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    native_tools: bool = Field(False, description="offer the benchmark's tool surface as the endpoint's tools=")

    @model_validator(mode="after")
    def _complete(self) -> PolicySpec:
        refuse_inline_secrets(self.model_dump(), "policy")
        if self.native_tools and self.kind != "endpoint":
            raise ValueError("--native-tools sends the env's tools as an endpoint's function-calling tools=: it "
                             "needs --policy endpoint")
        if self.kind == "endpoint" and not self.base_url:
            raise ValueError("policy 'endpoint' needs --base-url (an OpenAI-compatible endpoint, e.g. "
                             "http://127.0.0.1:8080/v1)")
        if self.kind == "callable" and (not self.callable or ":" not in self.callable):
            raise ValueError("policy 'callable' needs --callable module:function")
        if self.kind == "adapter" and not self.adapter:
            raise ValueError("policy 'adapter' needs --adapter RUN_DIR (a rubricgym train run folder)")
        return self


class Reply(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: list[tuple[str, str]] = Field(default_factory=list, description="(name, arguments JSON) per call")


class PolicyError(RuntimeError):
    """The policy could not answer (its endpoint failed after the retries, or it raised)."""


ChatPolicy = Callable[[list[dict[str, str]], str, str], Reply]


def build_policy(spec: PolicySpec, tools: Sequence[ToolSpec] = ()) -> ChatPolicy:
    """The policy as a function of (messages, env id, task id). Endpoint and local models go
    through the judge's chat backends: one implementation of bounded, retried calls. ``tools``
    (``--native-tools``) are offered to the endpoint as its function-calling ``tools=``."""
    if spec.kind == "agent":
        raise ValueError("an in-process agent is played by rubricgym.evaluate in its own process: it has no "
                         "module:function a worker could import (use --policy callable)")
    if spec.kind == "callable":
        function = import_callable(spec.callable)  # from the current folder, as the parent checked it
        accepts = inspect.signature(function).parameters

        def call_user(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
            extra = {k: v for k, v in (("env_id", env_id), ("task_id", task_id)) if k in accepts}
            return Reply(text=str(function([dict(m) for m in messages], **extra)))

        return call_user
    from rubricgym.judges.client import ChatRequest, OpenAIChatBackend, TransformersChatBackend  # optional: the judge extra (openai)
    from rubricgym.judges.config import JudgeSettings, ResponseFormat  # optional: the judge extra

    if spec.kind == "endpoint":
        backend: Any = OpenAIChatBackend(JudgeSettings(
            base_url=spec.base_url, model=spec.model, api_key_env=spec.api_key_env, api_key_file=spec.api_key_file,
            response_format=ResponseFormat.NONE, timeout_s=spec.timeout_s, max_transport_retries=spec.max_retries,
            temperature=spec.temperature, seed=None))
    elif spec.kind == "adapter":
        model, tokenizer, label = trained_adapter(Path(str(spec.adapter)))
        backend = TransformersChatBackend(model, tokenizer, model_id=label)
    else:
        backend = TransformersChatBackend.from_loader(spec.local_model)

    def call_model(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
        request = ChatRequest(phase="policy", messages=messages, schema_name="policy", json_schema={},
                              max_tokens=spec.max_tokens, temperature=spec.temperature,
                              tools=[t.openai_schema() for t in tools])
        try:
            reply = backend.complete(request)
        except Exception as exc:  # classified transport failures, a local model's errors
            raise PolicyError(f"{type(exc).__name__}: {exc}") from exc
        return Reply(text=reply.text, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                     tool_calls=[(c.name, c.arguments) for c in reply.tool_calls])

    return call_model


def intact_checkpoint(run_dir: Path) -> Any:
    """The newest checkpoint of a run folder that verifies (pickle-free reader), else ValueError."""
    from rubricgym.trainers.checkpoint import newest_intact  # lazy CLI: torch and peft only for --adapter

    loaded, skipped = newest_intact(run_dir, move_aside=False)
    if loaded is None:
        why = "; ".join(skipped) or "no checkpoint in it"
        raise ValueError(f"--adapter {run_dir}: not a run folder with an intact checkpoint ({why})")
    return loaded


def trained_adapter(run_dir: Path) -> tuple[Any, Any, str]:
    """(model, tokenizer, label) of a training run: the base model its config names with the
    LoRA weights of its newest intact checkpoint, read by the pickle-free checkpoint reader
    (JSON state, safetensors tensors). Nothing in the run folder names code to import."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict  # the train extra

    from rubricgym.models import load_causal_lm
    from rubricgym.trainers.config import TrainConfig

    loaded = intact_checkpoint(run_dir)
    config = TrainConfig.model_validate(loaded.state.config)
    model, tokenizer = load_causal_lm(config.model.name, seed=config.run.seed)
    lora = LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
                      target_modules=list(config.lora.target_modules), task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    result = set_peft_model_state_dict(model, loaded.adapter)
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"--adapter {run_dir}: its adapter does not fit {config.model.name!r} "
                         f"(unexpected keys {list(result.unexpected_keys)[:3]})")
    model.eval()
    return model, tokenizer, f"adapter:{run_dir.name}@{loaded.state.iteration}"
