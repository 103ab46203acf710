"""Judge backends behind one interface: ``complete(ChatRequest) -> ChatReply``.

- ``OpenAIChatBackend``: any OpenAI-compatible chat server (OpenAI, vLLM, llama.cpp /
  llama-cpp-python) through the ``openai`` package, with our own bounded retries (tenacity)
  on transport errors, timeouts, 429 and 5xx.
- ``TransformersChatBackend``: an in-process (model, tokenizer) pair - the self-judge, where
  the policy judges its own rollouts.

Backends only move text; validation, repair, caching and accounting live in
``rubricgym.judges.structured``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol, runtime_checkable

from rubricgym.bounded_http import ReplyTooLarge, bounded_http_client

from pydantic import BaseModel, ConfigDict, Field

from rubricgym.judges.config import JudgeSettings, ResponseFormat
from rubricgym.models import load_causal_lm
from rubricgym.secret_refs import redact
from rubricgym.untrusted import clean_text

__all__ = ["ChatBackend", "ChatReply", "ChatRequest", "JudgeTransportError", "OpenAIChatBackend", "TransformersChatBackend", "classify_transport_error", "retryable_transport_error"]

log = logging.getLogger(__name__)


class JudgeTransportError(RuntimeError):
    """The backend gave no reply (after retries): connection, timeout, HTTP error."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class ChatRequest(BaseModel):
    """One structured judge call. Everything that can change the answer is a field here,
    so the cache key (``cache_payload``) covers the full request."""

    model_config = ConfigDict(frozen=True)

    phase: str
    messages: list[dict[str, str]]
    schema_name: str
    json_schema: dict[str, Any]
    max_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    sample: int = Field(0, description="repeat index (self-judge k); distinct repeats are distinct requests")
    thinking: bool | None = Field(None, description="the chat template's enable_thinking; None: the backend's default")
    tools: list[dict[str, Any]] = Field(default_factory=list,
                                        description="OpenAI `tools=` entries offered to the model (function calling)")


class ToolCall(BaseModel):
    """One function call of a reply, as the endpoint sent it (``arguments``: its JSON text)."""

    name: str
    arguments: str = ""


class ChatReply(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


@runtime_checkable
class ChatBackend(Protocol):
    #: at most this many calls in flight (None: no backend limit)
    max_concurrency: int | None
    #: True when the server enforces the schema while decoding
    enforces_schema: bool
    #: whether the model thinks before answering when ``thinking`` is not set (sizes the token caps)
    thinks_by_default: bool

    def identity(self) -> dict[str, Any]:
        """What identifies the answering model in cache keys (never keys or URLs)."""

    def complete(self, request: ChatRequest) -> ChatReply:
        """Raise ``JudgeTransportError`` when no reply could be had."""


def _too_large(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the openai client wraps transport errors; look down the chain
        if seen is None:
            return False
        if isinstance(seen, ReplyTooLarge):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def retryable_transport_error(exc: BaseException) -> bool:
    """Worth asking again: timeouts, connection errors, 429 and 5xx (not an oversized reply)."""
    import openai  # optional: the judge extra

    if _too_large(exc):  # the same server would send the same body again
        return False
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def retry_after_s(exc: BaseException | None) -> float | None:
    """The seconds a 429/503 answer's ``Retry-After`` header asks for (its number form), else None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:  # the HTTP-date form: fall back to the exponential back-off
        return None
    return seconds if seconds is not None and seconds >= 0 and seconds == seconds else None


class WaitRetryAfterOrExponential:
    """tenacity wait: what the server's ``Retry-After`` asks (capped at ``max_s``), else the
    exponential back-off."""

    def __init__(self, initial_s: float, max_s: float):
        from tenacity import wait_exponential  # optional: judge extra

        self.max_s = max_s
        self.exponential = wait_exponential(multiplier=initial_s, max=max_s)

    def __call__(self, retry_state: Any) -> float:
        outcome = retry_state.outcome
        asked = retry_after_s(outcome.exception() if outcome is not None and outcome.failed else None)
        return min(asked, self.max_s) if asked is not None else self.exponential(retry_state)


def classify_transport_error(exc: BaseException) -> JudgeTransportError:
    """An openai/httpx failure as a ``JudgeTransportError`` whose kind names what happened."""
    import openai  # optional: the judge extra

    if _too_large(exc):
        return JudgeTransportError("reply_too_large", "the reply body was over max_reply_bytes")
    if isinstance(exc, openai.APITimeoutError):
        return JudgeTransportError("timeout", "the judge server did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return JudgeTransportError("connection", type(exc).__name__)
    if isinstance(exc, openai.APIStatusError):
        return JudgeTransportError(f"http_{exc.status_code}", type(exc).__name__)
    return JudgeTransportError("bad_reply", f"{type(exc).__name__}: {redact(str(exc))[:200]}")


class OpenAIChatBackend:
    """OpenAI-compatible server. The key goes only into the ``openai`` client's auth header."""

    max_concurrency: int | None = None
    thinks_by_default = False  # thinking unset is not sent: the server decides (its thinking is stripped all the same)

    def __init__(self, settings: JudgeSettings):
        import openai  # optional: the judge extra

        self.settings = settings
        secret = settings.api_key()  # read from the environment / key file now, kept only by the client
        key = secret.get_secret_value() if secret is not None else ""
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=key or "no-key",  # local servers ignore it; the openai client insists on one
            max_retries=0,  # retries are ours: bounded, classified, counted
            timeout=settings.timeout_s,
            http_client=bounded_http_client(settings.max_reply_bytes, settings.timeout_s),
        )
        self.enforces_schema = settings.response_format in (
            ResponseFormat.JSON_SCHEMA,
            ResponseFormat.JSON_OBJECT_SCHEMA,
        )

    def identity(self) -> dict[str, Any]:
        return {
            "backend": "openai-chat",
            "model": self.settings.model,
            "response_format": self.settings.response_format.value,
            "strict": self.settings.strict_schema,
        }

    def _response_format(self, request: ChatRequest) -> dict[str, Any] | None:
        fmt = self.settings.response_format
        if fmt is ResponseFormat.JSON_SCHEMA:
            spec: dict[str, Any] = {"name": request.schema_name, "schema": request.json_schema}
            if self.settings.strict_schema:
                spec["strict"] = True
            return {"type": "json_schema", "json_schema": spec}
        if fmt is ResponseFormat.JSON_OBJECT_SCHEMA:
            return {"type": "json_object", "schema": request.json_schema}
        if fmt is ResponseFormat.JSON_OBJECT:
            return {"type": "json_object"}
        return None

    def _once(self, request: ChatRequest) -> ChatReply:
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if request.seed is not None:
            kwargs["seed"] = request.seed
        fmt = self._response_format(request)
        if fmt is not None:
            kwargs["response_format"] = fmt
        if request.thinking is not None:  # vLLM / SGLang / llama.cpp read it into the chat template
            kwargs["extra_body"] = {"chat_template_kwargs": {"enable_thinking": request.thinking}}
        if request.tools:
            kwargs["tools"] = request.tools
        resp = self._client.chat.completions.create(**kwargs)
        if not getattr(resp, "choices", None):
            raise JudgeTransportError("bad_reply", "no choices in the reply")
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        calls = (getattr(choice.message, "tool_calls", None) or []) if choice.message is not None else []
        return ChatReply(  # the endpoint's text is untrusted: normalized before anything reads or writes it
            text=clean_text((choice.message.content or "") if choice.message is not None else ""),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason=choice.finish_reason,
            tool_calls=[ToolCall(name=clean_text(str(getattr(c.function, "name", "") or "")),
                                 arguments=clean_text(str(getattr(c.function, "arguments", "") or "")))
                        for c in calls if getattr(c, "function", None) is not None],
        )

    def complete(self, request: ChatRequest) -> ChatReply:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt  # optional: judge extra

        retrying = Retrying(
            retry=retry_if_exception(retryable_transport_error),
            stop=stop_after_attempt(self.settings.max_transport_retries + 1),
            wait=WaitRetryAfterOrExponential(self.settings.backoff_initial_s, self.settings.backoff_max_s),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(request)
        except JudgeTransportError:
            raise
        except Exception as exc:  # classified; the message never includes request headers
            err = classify_transport_error(exc)
            log.warning("judge call (%s) failed: %s", request.phase, err)
            raise err from None
        raise JudgeTransportError("no_attempt", "retry loop ended without a call")  # pragma: no cover

    def close(self) -> None:
        self._client.close()


class TransformersChatBackend:
    """A local causal LM answers judge calls in-process (no decoding constraint: the JSON is
    extracted from the text, validated and repaired like any other reply).

    ``model_id`` enters cache keys: when the weights change (a training step), pass a new
    id - or no cache - or stale verdicts of an older policy would be reused.
    """

    max_concurrency: int | None = 1
    enforces_schema = False
    thinks_by_default = True  # the chat template's enable_thinking is on unless thinking=False

    def __init__(self, model: Any, tokenizer: Any, model_id: str | None = None, max_prompt_tokens: int | None = None):
        self.model = model
        self.tokenizer = tokenizer
        name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        self.model_id = model_id or f"local:{name}"
        self.max_prompt_tokens = max_prompt_tokens
        self._lock = threading.Lock()

    @classmethod
    def from_loader(cls, name: str, device: str | None = None, **kwargs: Any) -> TransformersChatBackend:
        """Load through ``rubricgym.models`` ("smollm2", "tiny", or a local folder)."""
        model, tokenizer = load_causal_lm(name, device=device)
        return cls(model, tokenizer, model_id=kwargs.pop("model_id", f"local:{name}"), **kwargs)

    def identity(self) -> dict[str, Any]:
        return {"backend": "transformers", "model": self.model_id}

    def prompt_text(self, messages: list[dict[str, str]], thinking: bool | None = None) -> str:
        """The prompt as the model sees it. Thinking is on unless ``thinking`` is False (DRACO's
        self-judge thinks in every phase); a template without ``enable_thinking`` ignores it."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                           enable_thinking=thinking is not False)
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "

    def _prompt_ids(self, messages: list[dict[str, str]], thinking: bool | None = None) -> Any:
        tok = self.tokenizer
        text = self.prompt_text(messages, thinking)
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
        if self.max_prompt_tokens is not None and ids.shape[1] > self.max_prompt_tokens:
            raise JudgeTransportError("prompt_too_long", f"{ids.shape[1]} > {self.max_prompt_tokens} tokens")
        return ids

    def complete(self, request: ChatRequest) -> ChatReply:
        import torch  # optional: the train extra

        with self._lock:
            try:
                ids = self._prompt_ids(request.messages, request.thinking).to(self.model.device)
                sample = request.temperature > 0
                gen: dict[str, Any] = {"max_new_tokens": request.max_tokens, "do_sample": sample}
                if sample:
                    gen["temperature"] = request.temperature
                    if request.top_p is not None:
                        gen["top_p"] = request.top_p
                pad = self.tokenizer.pad_token_id
                if pad is None:
                    pad = self.tokenizer.eos_token_id
                gen["pad_token_id"] = pad
                seed = (request.seed or 0) * 1000003 + request.sample
                # fork the RNG: judging must not perturb the trainer's sampling stream
                with torch.random.fork_rng(devices=[]), torch.no_grad():
                    torch.manual_seed(seed)
                    out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **gen)
            except JudgeTransportError:
                raise
            except Exception as exc:
                raise JudgeTransportError("local_generate", f"{type(exc).__name__}: {str(exc)[:200]}") from None
        new = out[0, ids.shape[1] :]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        eos = self.tokenizer.eos_token_id
        finished = eos is not None and int(new.numel()) > 0 and int(new[-1]) == eos
        return ChatReply(
            text=text,
            prompt_tokens=int(ids.shape[1]),
            completion_tokens=int(new.numel()),
            finish_reason="stop" if finished or new.numel() < request.max_tokens else "length",
        )
