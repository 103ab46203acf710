"""Judge configuration: one pydantic-settings object, read from arguments or the environment.

Environment: ``RUBRICGYM_JUDGE_BASE_URL``, ``RUBRICGYM_JUDGE_MODEL``, any other field as
``RUBRICGYM_JUDGE_<FIELD>``. The settings never hold the API key: they name where it is
(``api_key_env``, default ``OPENAI_API_KEY``, falling back to ``RUBRICGYM_JUDGE_API_KEY``;
or ``api_key_file``), and ``api_key()`` reads it when a client is built. A key given as a
setting value (``api_key: ...``, or any string shaped like a provider key) is refused with
a message saying how to pass it, so no dump, cache key, ledger or run folder can hold it.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricgym.bounded_http import DEFAULT_MAX_REPLY_BYTES
from rubricgym.secret_refs import read_secret, refuse_inline_secrets


class ResponseFormat(str, Enum):
    """How a structured answer is requested from an OpenAI-compatible server.

    - ``json_schema``: OpenAI / vLLM structured outputs (``{"type": "json_schema", ...}``).
    - ``json_object_schema``: llama.cpp / llama-cpp-python: ``{"type": "json_object",
      "schema": ...}`` is grammar-constrained there (``json_schema`` gives HTTP 500).
    - ``json_object``: plain JSON mode; the schema is only in the prompt.
    - ``none``: no response_format at all; the schema is only in the prompt.
    """

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT_SCHEMA = "json_object_schema"
    JSON_OBJECT = "json_object"
    NONE = "none"


class JudgeSettings(BaseSettings):
    """Everything that decides how judge calls are made (not what they ask)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICGYM_JUDGE_", extra="ignore", populate_by_name=True,
                                      hide_input_in_errors=True)  # an error must never echo a key

    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    model: str = Field("gpt-4o-mini", description="model name sent to the server")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable that holds the bearer key")
    api_key_file: str | None = Field(None, description="file whose first line is the key (instead of api_key_env)")
    response_format: ResponseFormat = ResponseFormat.JSON_SCHEMA
    strict_schema: bool = Field(False, description="send strict=true with json_schema (OpenAI strict mode)")
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = Field(0, description="sent when not None; servers that support it become repeatable")
    # the answer caps, sized for the criteria caps below (about 35 tokens a criterion, 50 a verdict with its
    # reason); a thinking judge gets max_thinking_tokens more in every phase
    max_tokens_propose: int = Field(700, description="enough for max_proposed_criteria (15) criteria")
    max_tokens_extend: int = Field(500, description="enough for max_extended_criteria (10) criteria")
    max_tokens_merge: int = Field(1100, description="enough for max_criteria (24) criteria")
    max_tokens_score: int = Field(1500, description="enough for ~24 verdicts with one-line reasons")
    max_thinking_tokens: int = Field(
        1024, ge=0, description="added to every phase's cap when the judge thinks first (thinking on, or a local "
        "model's default): the caps above are sized for the answer alone, and a thinking reply cut off at its "
        "cap has no answer")
    timeout_s: float = Field(60.0, gt=0, description="per HTTP call")
    max_reply_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, gt=0, description="a reply body larger than this is refused while it "
                                 "is read (never held whole), recorded as reply_too_large and not retried")
    max_transport_retries: int = Field(3, ge=0, description="retries on connection errors, timeouts, 429, 5xx")
    backoff_initial_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(8.0, ge=0)
    max_repairs: int = Field(2, ge=0, description="re-asks after an unparsable / invalid answer")
    concurrency: int = Field(4, ge=1, description="judge calls in flight at once")
    cache_dir: str | None = Field(None, description="persistent response cache (sqlite); None: no cache")
    price_prompt_per_mtok: float = Field(0.0, ge=0, description="USD per 1M prompt tokens, for the ledger")
    price_completion_per_mtok: float = Field(0.0, ge=0, description="USD per 1M completion tokens")
    self_judge_repeats: int = Field(3, ge=1, description="k: self-judge scoring repeats; pass needs all k")
    ask_reasons: bool = Field(True, description="ask a one-line reason per verdict (better verdicts, more tokens)")
    include_static_in_dynamic: bool = Field(False, description="dynamic variants also merge the static rubric in")
    max_criteria: int = Field(24, ge=1, description="cap on the merged criteria set: DRACO's merge prompt "
                              "(Listing 3) states a hard ceiling of 24, 'a ceiling, NOT a target'")
    thinking: bool | None = Field(
        None, description="the model's thinking mode in every judge phase, passed through its chat template "
        "(enable_thinking; templates without it ignore it). None: on for a local model (the self-judge, as "
        "DRACO runs it), not sent to HTTP endpoints; true/false: sent to both (HTTP: chat_template_kwargs)")
    max_proposed_criteria: int = Field(15, ge=1, description="cap on the criteria proposed from the instruction: "
                                       "DRACO's Listing 1, 'a maximum of 15 rubrics'")
    max_extended_criteria: int = Field(10, ge=1, description="cap on the criteria one rollout's extension adds: "
                                       "DRACO's Listing 2, 'a maximum of 10 rubrics'")
    max_new_criteria: int | None = Field(None, ge=1, description="when set, caps both the proposal and each "
                                         "extension (small judges: fewer, shorter answers)")
    max_citations: int = Field(8, ge=1, description="cap on cited steps per verdict")
    max_observation_chars: int = Field(1500, ge=100, description="observation text per step shown to the judge")
    max_response_chars: int = Field(1500, ge=100, description="agent response text per step shown to the judge")

    @model_validator(mode="before")
    @classmethod
    def _no_inline_key(cls, data: Any) -> Any:
        refuse_inline_secrets(data, "judge settings")
        return data

    def api_key(self) -> SecretStr | None:
        """The key, read now from ``api_key_file`` or ``api_key_env`` (never stored here)."""
        fallback = ("RUBRICGYM_JUDGE_API_KEY",) if self.api_key_env == "OPENAI_API_KEY" else ()
        return read_secret(self.api_key_env, self.api_key_file, fallback_env=fallback)

    def public_dump(self) -> dict[str, Any]:
        """Settings safe to write to logs, ledgers and run directories (they hold no key)."""
        data = self.model_dump(mode="json")
        key = self.api_key()
        data["api_key_set"] = key is not None and bool(key.get_secret_value())
        return data

    def new_criteria_cap(self, phase: str) -> int:
        """How many criteria one ``propose`` or ``extend`` answer may hold."""
        paper = self.max_proposed_criteria if phase == "propose" else self.max_extended_criteria
        return min(paper, self.max_new_criteria) if self.max_new_criteria is not None else paper

    def max_tokens(self, phase: str, thinking: bool = False) -> int:
        """The phase's token cap: its answer's, plus ``max_thinking_tokens`` when the judge thinks."""
        return int(getattr(self, f"max_tokens_{phase}")) + (self.max_thinking_tokens if thinking else 0)
