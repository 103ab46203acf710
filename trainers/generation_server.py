"""Generation through an OpenAI-compatible server (``generation.backend: openai``).

Any server whose ``/v1/completions`` returns per-token log-probs works: vLLM, SGLang,
llama.cpp. Prompts go as token ids (``generation.server_prompt: ids``: vLLM, SGLang) or as
text (``text``: llama-cpp-python, which takes strings only; the chat template's special
tokens are tokenized by the server as specials). The sampled token ids come back as
``token_id:N`` strings where the server offers that (vLLM's ``return_tokens_as_token_ids``),
else each returned token string is mapped to its id through the trainer's tokenizer; a
response whose pieces do not all map one-to-one is re-encoded and counted in
``reencoded_responses`` (its ids may differ from the server's sampled ids).

After each update ``sync_weights`` saves the LoRA adapter and, with
``generation.server_lora: true``, asks the server to load it (vLLM's dynamic LoRA endpoint
``POST /v1/load_lora_adapter``, server started with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``); later requests name that adapter. This LoRA path
is unverified: no vLLM run has been made (docs/scale.md). Without it the server keeps
sampling from its own weights, and a warning says the samples are off-policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from rubricgym.bounded_http import bounded_http_client
from rubricgym.secret_refs import read_secret
from rubricgym.trainers.config import GenerationSettings
from rubricgym.trainers.generation import cut_response, stop_token_ids

log = logging.getLogger(__name__)

TOKEN_ID_PREFIX = "token_id:"


class ServerGenerationError(RuntimeError):
    """The server's answer cannot be used (no log-probs, an HTTP error, a malformed body)."""


class ServerSample(BaseModel):
    """One sampled response: token ids, the server's log-prob of each, and how it ended."""

    model_config = ConfigDict(frozen=True)

    token_ids: list[int]
    logprobs: list[float | None]
    finish_reason: str | None = None
    ids_from_server: bool = True  # false: re-encoded from the text (pieces did not map one-to-one)
    prompt_tokens: int | None = None  # the server's count of the prompt (usage), when it reports one


class PieceTable:
    """Token string -> id, from the tokenizer's own decoding of each id (unique pieces only)."""

    def __init__(self, tokenizer: Any):
        size = len(tokenizer)
        seen: dict[str, int] = {}
        clashes: set[str] = set()
        for i in range(size):
            piece = tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            if piece in seen:
                clashes.add(piece)
            else:
                seen[piece] = i
        self.ids = {p: i for p, i in seen.items() if p not in clashes}

    def lookup(self, pieces: Sequence[str]) -> list[int] | None:
        out = []
        for p in pieces:
            i = self.ids.get(p)
            if i is None:
                return None
            out.append(i)
        return out


class OpenAIServerGenerator:
    """Samples responses from an OpenAI-compatible completions endpoint, many in flight."""

    def __init__(self, tokenizer: Any, settings: GenerationSettings, model: Any = None,
                 adapter_dir: Path | None = None, seed: int = 0):
        if not settings.server_url:
            raise ValueError("generation.backend='openai' needs generation.server_url (e.g. http://127.0.0.1:8000/v1)")
        self.tokenizer = tokenizer
        self.settings = settings
        self.base_url = settings.server_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")
        self.model_name = settings.server_model
        self.stops = stop_token_ids(tokenizer, model)
        self.adapter_dir = Path(adapter_dir) if adapter_dir else None
        self.seed = seed
        self.calls = 0
        self.pieces: PieceTable | None = None
        # replies bounded in bytes while read; a key only when the config names its variable
        self.client = bounded_http_client(settings.server_max_reply_bytes, timeout=settings.server_timeout_s)
        self.api_key = read_secret(env=settings.server_api_key_env) if settings.server_api_key_env else None
        self.vocab_size = len(tokenizer)
        self.generated_tokens = 0
        self.seconds = 0.0
        self.reencoded_responses = 0
        self.prompt_count_mismatches = 0
        self.last_samples: list[ServerSample] = []
        self.lora_name: str | None = None
        self._warned_off_policy = False

    # ---- weights ---------------------------------------------------------------------------
    def sync_weights(self, model: Any, iteration: int) -> None:
        """Load the current adapter into the server (vLLM dynamic LoRA), or warn once that
        the server samples from its own weights."""
        if not self.settings.server_lora:
            if iteration > 0 and not self._warned_off_policy:
                log.warning("generation.backend='openai' without server_lora: the server samples from its own "
                            "weights, not the updated policy (off-policy samples)")
                self._warned_off_policy = True
            return
        if self.adapter_dir is None:
            raise ValueError("server_lora needs an adapter folder the server can read")
        path = (self.adapter_dir / f"iter-{iteration:06d}").resolve()
        model.save_pretrained(str(path))
        name = f"policy-{iteration}"
        self._post(f"{self.root_url}/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        previous, self.lora_name = self.lora_name, name
        if previous is not None:
            try:
                self._post(f"{self.root_url}/v1/unload_lora_adapter", {"lora_name": previous})
            except ServerGenerationError:
                log.warning("unloading adapter %s from the server failed", previous)

    def _post(self, url: str, body: dict[str, Any]) -> Any:
        try:
            r = self.client.post(url, json=body, headers=self._headers())
        except httpx.HTTPError as exc:
            raise ServerGenerationError(f"{url}: {type(exc).__name__}: {exc}") from exc
        if r.status_code >= 400:
            raise ServerGenerationError(f"{url}: HTTP {r.status_code}: {r.text[:300]}")
        try:
            return r.json()
        except ValueError:
            return r.text

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key.get_secret_value()}"} if self.api_key else {}

    # ---- sampling -------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]]) -> list[list[int]]:
        samples = self.sample(prompts)
        return [s.token_ids for s in samples]

    def sample(self, prompts: Sequence[Sequence[int]]) -> list[ServerSample]:
        if not prompts:
            return []
        started = time.perf_counter()
        call = self.calls
        self.calls += 1
        jobs = [(list(p), self.seed * 1_000_003 + call * 10_007 + k) for k, p in enumerate(prompts)]
        with ThreadPoolExecutor(max_workers=min(self.settings.server_concurrency, len(jobs))) as pool:
            samples = list(pool.map(lambda job: self._one(*job), jobs))
        self.last_samples = samples
        self.generated_tokens += sum(len(s.token_ids) for s in samples)
        self.seconds += time.perf_counter() - started
        return samples

    def _request(self, prompt_ids: list[int], seed: int) -> dict[str, Any]:
        s = self.settings
        prompt: Any = prompt_ids if s.server_prompt == "ids" else self.tokenizer.decode(
            prompt_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        body: dict[str, Any] = {
            "model": self.lora_name or self.model_name, "prompt": prompt, "max_tokens": s.max_new_tokens,
            "temperature": s.temperature, "top_p": s.top_p, "logprobs": 1, "seed": seed, "stream": False,
            # vLLM / SGLang extensions (other servers ignore unknown fields)
            "return_tokens_as_token_ids": True, "skip_special_tokens": False,
        }
        if s.top_k:
            body["top_k"] = s.top_k
        return body

    def _one(self, prompt_ids: list[int], seed: int) -> ServerSample:
        data = self._post(f"{self.base_url}/completions", self._request(prompt_ids, seed))
        try:
            choice = data["choices"][0]
            lp = choice.get("logprobs") or {}
            tokens: list[str] = list(lp.get("tokens") or [])
            values: list[float | None] = list(lp.get("token_logprobs") or [])
            text: str = choice.get("text") or ""
            finish = choice.get("finish_reason")
            usage = data.get("usage") or {}
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ServerGenerationError(f"malformed completion answer: {str(data)[:300]}") from exc
        if text and not tokens:
            raise ServerGenerationError("the server returned no per-token log-probs; generation.backend='openai' "
                                        "needs a server that honours `logprobs` on /v1/completions")
        ids, exact = self._token_ids(tokens, text)
        if not exact:
            self.reencoded_responses += 1
            values = [None] * len(ids)
        prompt_tokens = usage.get("prompt_tokens")
        if isinstance(prompt_tokens, int) and prompt_tokens != len(prompt_ids):
            self.prompt_count_mismatches += 1
        # the stop token ends the response as in local sampling (kept, so the policy learns to stop)
        if finish == "stop" and (not ids or ids[-1] not in self.stops) and self.stops:
            ids.append(self.stops[0])
            values.append(None)
        ids = cut_response(ids, self.stops)
        return ServerSample(token_ids=ids, logprobs=values[: len(ids)], finish_reason=finish, ids_from_server=exact,
                            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None)

    def _token_ids(self, tokens: Sequence[str], text: str) -> tuple[list[int], bool]:
        if tokens and all(isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) for t in tokens):
            return [self._token_id(t[len(TOKEN_ID_PREFIX):]) for t in tokens], True
        if self.pieces is None:
            self.pieces = PieceTable(self.tokenizer)
        ids = self.pieces.lookup(tokens)
        if ids is not None and "".join(tokens) == text:
            return ids, True
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]), False

    def _token_id(self, digits: str) -> int:
        """A server's ``token_id:N``: ASCII digits naming an id of this tokenizer's vocabulary."""
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 9) or int(digits) >= self.vocab_size:
            raise ServerGenerationError(f"the server returned the token {TOKEN_ID_PREFIX}{digits[:40]!r}, not an id of "
                                        f"this tokenizer's vocabulary (0..{self.vocab_size - 1}): is it serving "
                                        "another model?")
        return int(digits)

    def close(self) -> None:
        self.client.close()
