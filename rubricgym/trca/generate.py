"""Generate an operator library with an LLM, validate it, and regenerate what is rejected.

The TRCA method builds each library once, offline, from the benchmark's interface: the facts
and binding schemas, the action grammar and what real resets look like. ``generate_library``
asks an OpenAI-compatible model (the judge's client settings, cache and ledger) once for
every operator, validates the answer with ``check_library`` (every problem, with its
reason), keeps the operators that pass and asks again only for replacements of the rejected
ones, for at most ``max_attempts`` calls in all. Every attempt (what was asked, what came
back, what was rejected and why, what it cost) goes into a ledger.

An operator is judged in isolation from the ones rejected with it: the library is validated,
the operators named by a problem are set aside, and the rest is validated again until it
passes, so one broken condition cannot hide another operator's failing example.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

import cel
import gymnasium as gym
from pydantic import BaseModel, Field, ValidationError

from rubricgym.benchmark import BenchmarkSpec
from rubricgym.contract import model_ref
from rubricgym.credit.trca import CATEGORIES
from rubricgym.judges.cache import ResponseCache
from rubricgym.judges.client import ChatRequest, OpenAIChatBackend
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.ledger import Ledger
from rubricgym.judges.prompts import data_block, render_template
from rubricgym.judges.structured import StructuredCaller, extract_json_object
from rubricgym.registration import get_spec
from rubricgym.trca.operators import find_references
from rubricgym.trca.validate import LibraryProblem, check_library

DEFAULT_PER_CATEGORY = 5
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_TOKENS = 4000
MAX_EXAMPLES = 3
SYSTEM = ("You design deterministic reward operators for reinforcement learning of language agents. "
          "You answer with one JSON object and nothing else.")


def load_template(name: str) -> str:
    return resources.files("rubricgym.trca").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


# -- what the model answers ----------------------------------------------------------------------
class GeneratedExample(BaseModel):
    expected: bool
    facts: dict[str, Any] = Field(default_factory=dict)
    binding: dict[str, Any] = Field(default_factory=dict)
    coverage: list[str] = Field(default_factory=list)


class GeneratedOperator(BaseModel):
    """Lenient on purpose: the library validator, not this model, says what is wrong."""

    id: str
    description: str = ""
    condition: str
    examples: list[GeneratedExample] = Field(default_factory=list)


class GeneratedOperators(BaseModel):
    evidence: list[GeneratedOperator] = Field(default_factory=list)
    invalidity: list[GeneratedOperator] = Field(default_factory=list)
    execution: list[GeneratedOperator] = Field(default_factory=list)


def _strip_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON Schema without titles/descriptions (the grammar needs only the shape)."""
    if isinstance(schema, dict):
        return {k: _strip_schema(v) for k, v in schema.items() if k not in ("title", "description", "default")}
    if isinstance(schema, list):
        return [_strip_schema(v) for v in schema]
    return schema


def answer_schema(spec: BenchmarkSpec, counts: dict[str, int]) -> dict[str, Any]:
    """JSON Schema of the answer: exactly ``counts[c]`` operators per category, examples whose
    facts/binding may hold only the schemas' fields (so grammar-constrained decoding cannot
    invent a field)."""
    defs: dict[str, Any] = {}

    def fields(model: type[BaseModel]) -> dict[str, Any]:
        schema = _strip_schema(model.model_json_schema(ref_template="#/$defs/{model}"))
        defs.update(schema.pop("$defs", {}))
        return {"type": "object", "properties": schema.get("properties", {}), "additionalProperties": False}

    example = {
        "type": "object",
        "properties": {
            "expected": {"type": "boolean"},
            "facts": fields(spec.facts_model),
            "binding": fields(spec.binding_model),
            "coverage": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 4},
        },
        "required": ["expected", "facts"],
        "additionalProperties": False,
    }
    operator = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[a-z][a-z0-9_]{1,39}$"},
            "description": {"type": "string", "maxLength": 200},
            "condition": {"type": "string", "maxLength": 400},
            "examples": {"type": "array", "items": example, "minItems": 2, "maxItems": MAX_EXAMPLES},
        },
        "required": ["id", "description", "condition", "examples"],
        "additionalProperties": False,
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {c: {"type": "array", "items": operator, "minItems": n, "maxItems": n}
                       for c, n in counts.items()},
        "required": list(counts),
        "additionalProperties": False,
    }
    if defs:
        schema["$defs"] = defs
    return schema


# -- what the model is shown ---------------------------------------------------------------------
class ExampleTask(BaseModel):
    task_id: str
    instruction: str
    observation: str
    binding: dict[str, Any]
    admissible_actions: list[str] = Field(default_factory=list)
    after_expert_step: dict[str, Any] | None = None


class EnvInterface(BaseModel):
    """What the model is shown about an env besides its schemas."""

    grammar: str = Field(description="the action format instruction the agent gets")
    tasks: list[ExampleTask]


def read_interface(env_id: str, count: int = 2, env_kwargs: dict[str, Any] | None = None,
                   max_chars: int = 1200) -> EnvInterface:
    """The action grammar and real resets of ``env_id`` (``gym.make`` + ``reset``) on its first
    ``count`` tasks, with the facts after one expert step where the benchmark has an expert."""
    spec = get_spec(env_id)
    expert = spec.load_expert()
    env = gym.make(env_id, reward="none", **(env_kwargs or {}))
    out = []
    try:
        base = env.unwrapped
        for task_id in list(base.adapter.task_ids())[:count]:
            observation, info = env.reset(seed=0, options={"task_id": task_id})
            after = None
            plan = list(expert(base.adapter)) if expert is not None else []
            if plan:
                _, _, _, _, step_info = env.step(base.adapter.grammar.render(plan[0]))
                facts = step_info["transition"].facts
                defaults = type(facts)()
                after = {"action": step_info["transition"].action.action,
                         "facts": {k: v for k, v in facts.model_dump(mode="json").items()
                                   if v != getattr(defaults, k)}}
            binding = info.get("binding")
            out.append(ExampleTask(
                task_id=task_id, instruction=str(info.get("instruction", ""))[:max_chars],
                observation=str(observation)[:max_chars],
                binding=binding.model_dump(mode="json") if isinstance(binding, BaseModel) else dict(binding or {}),
                admissible_actions=[str(a) for a in (info.get("admissible_actions") or [])][:15],
                after_expert_step=after))
        grammar = base.adapter.grammar.instruction()
    finally:
        env.close()
    return EnvInterface(grammar=grammar, tasks=out)


def _request_text(counts: dict[str, int]) -> str:
    parts = [f"{n} {c}" for c, n in counts.items() if n]
    return f"Write exactly {', '.join(parts)} operator(s)."


def generation_prompt(spec: BenchmarkSpec, grammar_instruction: str, tasks: Sequence[ExampleTask],
                      per_category: int) -> str:
    counts = dict.fromkeys(CATEGORIES, per_category)
    return render_template(load_template("generate_library"), {
        "benchmark": spec.name,
        "per_category": per_category,
        "facts_schema": json.dumps(_strip_descriptionless(spec.facts_model.model_json_schema())),
        "binding_schema": json.dumps(_strip_descriptionless(spec.binding_model.model_json_schema())),
        "grammar": grammar_instruction,
        "context_key": f"What identifies a situation in this environment: {spec.context_key}.\n" if spec.context_key else "",
        "observations": data_block("example_tasks", json.dumps([t.model_dump(mode="json") for t in tasks],
                                                               ensure_ascii=False)),
        "request": _request_text(counts),
    })


def _strip_descriptionless(schema: dict[str, Any]) -> dict[str, Any]:
    """Schemas for the prompt keep descriptions (they say what a field means), drop titles."""
    if isinstance(schema, dict):
        return {k: _strip_descriptionless(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_descriptionless(v) for v in schema]
    return schema


# -- the loop --------------------------------------------------------------------------------------
class RejectedOperator(BaseModel):
    id: str
    category: str
    reasons: list[str]
    operator: dict[str, Any]


class Attempt(BaseModel):
    attempt: int
    phase: str = Field(description="generate (the first call) or repair")
    requested: dict[str, int]
    received: int = 0
    accepted: list[str] = Field(default_factory=list)
    rejected: list[RejectedOperator] = Field(default_factory=list)
    error: str | None = Field(None, description="no usable answer (transport failure or unparsable reply)")
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class GenerationResult(BaseModel):
    benchmark: str
    model: str
    library: dict[str, Any] | None = Field(description="the valid library (rejected operators dropped), if any")
    candidate: dict[str, Any] | None = Field(None, description="the last candidate when no valid library resulted")
    problems: list[str] = Field(default_factory=list, description="why the candidate is not a valid library")
    attempts: list[Attempt]
    dropped: list[RejectedOperator] = Field(default_factory=list, description="still rejected after the last attempt")
    total: dict[str, Any] = Field(default_factory=dict, description="the ledger's totals")

    @property
    def ok(self) -> bool:
        return self.library is not None


def to_operator(op: GeneratedOperator, category: str) -> dict[str, Any]:
    """A library operator from an answer; ``reads``/``needs`` are derived from the condition
    (they only restate what it reads), nothing else is changed."""
    reads: list[str] = []
    needs: list[str] = []
    try:
        refs = find_references(op.condition, cel.compile(op.condition))
        reads, needs = sorted(refs.facts), sorted(refs.binding)
    except Exception:  # noqa: BLE001,S110 (any compile error: the validator reports it with its reason)
        pass
    return {"id": op.id, "category": category, "description": op.description, "reads": reads, "needs": needs,
            "condition": op.condition, "examples": [e.model_dump() for e in op.examples]}


def library_document(spec: BenchmarkSpec, operators: Sequence[dict[str, Any]], name: str, model: str) -> dict[str, Any]:
    return {
        "name": name,
        "benchmark": spec.name,
        "description": f"generated by `rubricgym library generate` with model {model}",
        "facts_model": model_ref(spec.facts_model),
        "binding_model": model_ref(spec.binding_model),
        "operators": list(operators),
    }


def split_valid(spec: BenchmarkSpec, operators: Sequence[dict[str, Any]], name: str, model: str
                ) -> tuple[list[dict[str, Any]], list[RejectedOperator], list[LibraryProblem]]:
    """The operators that pass validation together, the rejected ones with every reason, and
    the library-level problems left (e.g. an empty category)."""
    remaining = list(operators)
    rejected: list[RejectedOperator] = []
    seen: set[str] = set()
    for op in list(remaining):  # a repeated id: the later operator is the one rejected
        if op["id"] in seen:
            remaining.remove(op)
            rejected.append(RejectedOperator(id=op["id"], category=op["category"], operator=op,
                                             reasons=[f"[duplicate_id] id {op['id']!r} is already used by another operator"]))
        seen.add(op["id"])
    while True:
        _, problems = check_library(library_document(spec, remaining, name, model), spec.facts_model,
                                    spec.binding_model, spec.name)
        by_index: dict[int, list[str]] = {}
        index_of = {op["id"]: i for i, op in enumerate(remaining)}
        library_level = []
        for p in problems:
            index = index_of.get(p.operator or "")
            if index is None and p.operator and p.operator.startswith("operators["):
                index = int(p.operator[len("operators["):-1])
            if index is None:
                library_level.append(p)
            else:
                by_index.setdefault(index, []).append(f"[{p.kind}] {p.message}")
        if not by_index:
            return remaining, rejected, library_level
        for index in sorted(by_index, reverse=True):
            op = remaining.pop(index)
            rejected.append(RejectedOperator(id=op["id"], category=op["category"], reasons=by_index[index], operator=op))


def generate_library(
    spec: BenchmarkSpec,
    settings: JudgeSettings,
    grammar_instruction: str,
    tasks: Sequence[ExampleTask],
    per_category: int = DEFAULT_PER_CATEGORY,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    name: str | None = None,
    backend: Any = None,
    progress: Callable[[str], None] | None = None,
) -> GenerationResult:
    """Ask, validate, re-ask for the rejected operators; at most ``max_attempts`` calls."""
    if per_category < 1 or max_attempts < 1:
        raise ValueError("per_category and max_attempts must be >= 1")
    say = progress or (lambda _text: None)
    name = name or f"{spec.name.lower()}-generated"
    ledger = Ledger(settings.price_prompt_per_mtok, settings.price_completion_per_mtok)
    cache = ResponseCache(settings.cache_dir) if settings.cache_dir else None
    own_backend = backend is None
    backend = backend or OpenAIChatBackend(settings)
    caller = StructuredCaller(backend, ledger, cache, max_repairs=0)  # a bad answer is our repair loop's job
    first = generation_prompt(spec, grammar_instruction, tasks, per_category)
    history: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}]
    accepted: list[dict[str, Any]] = []
    rejected: list[RejectedOperator] = []
    attempts: list[Attempt] = []
    last_reply = ""
    try:
        for k in range(1, max_attempts + 1):
            have = {c: sum(op["category"] == c for op in accepted) for c in CATEGORIES}
            counts = {c: max(0, per_category - have[c]) for c in CATEGORIES}
            if not any(counts.values()):
                break
            phase = "repair" if last_reply else "generate"  # no answer yet: ask the first question again
            messages = list(history)
            if last_reply:
                messages += [{"role": "assistant", "content": last_reply[:6000]},
                             {"role": "user", "content": repair_prompt(accepted, rejected, counts)}]
            attempt = Attempt(attempt=k, phase=phase, requested=counts)
            say(f"[attempt {k}/{max_attempts}] {phase}: asking {settings.model} for "
                f"{sum(counts.values())} operator(s) ({', '.join(f'{n} {c}' for c, n in counts.items() if n)})")
            request = ChatRequest(phase=phase, messages=messages, schema_name="operators",
                                  json_schema=answer_schema(spec, {c: n for c, n in counts.items() if n}),
                                  max_tokens=max_tokens, temperature=settings.temperature, top_p=settings.top_p,
                                  seed=None if settings.seed is None else settings.seed + k - 1)
            with _heartbeat(say, settings.model):
                result = caller.call(request, GeneratedOperators, step=k)
            _account(attempt, ledger, k)
            if result.value is None:
                attempt.error = result.error or "no answer"
                attempts.append(attempt)
                say(f"  no usable answer: {attempt.error}")
                continue
            last_reply = json.dumps(result.value.model_dump(mode="json"))
            new = [to_operator(op, c) for c in CATEGORIES for op in getattr(result.value, c)[: counts[c]]]
            attempt.received = len(new)
            kept, rejected, _ = split_valid(spec, [*accepted, *new], name, settings.model)
            attempt.accepted = [op["id"] for op in kept if op not in accepted]
            attempt.rejected = [r for r in rejected if r.operator in new]
            accepted = kept
            attempts.append(attempt)
            say(f"  {len(new)} received, {len(attempt.accepted)} valid, {len(attempt.rejected)} rejected "
                f"({attempt.prompt_tokens}+{attempt.completion_tokens} tokens, ${attempt.cost_usd:.4f})")
            for r in attempt.rejected:
                say(f"    rejected {r.id} ({r.category}): {'; '.join(r.reasons)[:300]}")
    finally:
        if cache is not None:
            cache.close()
        if own_backend:
            backend.close()
    total = ledger.summary()["total"]
    document = library_document(spec, accepted, name, settings.model)
    _, problems = check_library(document, spec.facts_model, spec.binding_model, spec.name)
    if problems:
        candidate = library_document(spec, [*accepted, *(r.operator for r in rejected)], name, settings.model)
        return GenerationResult(benchmark=spec.name, model=settings.model, library=None, candidate=candidate,
                                problems=[str(p) for p in problems], attempts=attempts, dropped=rejected, total=total)
    return GenerationResult(benchmark=spec.name, model=settings.model, library=document, attempts=attempts,
                            dropped=rejected, total=total)


@contextmanager
def _heartbeat(say: Callable[[str], None], model: str, every_s: float = 30.0) -> Iterator[None]:
    """A line every ``every_s`` seconds while one call is in flight (a CPU model can take minutes)."""
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(every_s):
            say(f"  ... waiting for {model} ({time.monotonic() - start:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def repair_prompt(accepted: Sequence[dict[str, Any]], rejected: Sequence[RejectedOperator], counts: dict[str, int]) -> str:
    kept = [{"id": op["id"], "category": op["category"], "condition": op["condition"]} for op in accepted]
    bad = [{"id": r.id, "category": r.category, "condition": r.operator.get("condition"), "reasons": r.reasons}
           for r in rejected]
    return render_template(load_template("repair_operators"), {
        "accepted": data_block("accepted_operators", json.dumps(kept, indent=1, ensure_ascii=False)),
        "rejected": data_block("rejected_operators", json.dumps(bad, indent=1, ensure_ascii=False)),
        "request": _request_text(counts),
    })


def _account(attempt: Attempt, ledger: Ledger, k: int) -> None:
    row = ledger.totals(step=k, any_step=False)
    attempt.calls, attempt.cache_hits = int(row["calls"]), int(row["cache_hits"])
    attempt.prompt_tokens, attempt.completion_tokens = int(row["prompt_tokens"]), int(row["completion_tokens"])
    attempt.cost_usd = float(row["cost_usd"])


def parse_answer(text: str) -> GeneratedOperators:
    """An answer as the loop reads it (for tests and tools that replay stored answers)."""
    try:
        return GeneratedOperators.model_validate(extract_json_object(text))
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc
