"""Compiled operators: CEL programs judged over one step's facts, binding and prior coverage.

Speed: converting Python values to CEL costs microseconds per value (several times more
inside a nested map than as top-level variables), while running a compiled program on an
already-converted ``cel.Context`` costs under one. So each episode gets one ``cel.Context``;
per step only the fact fields some operator reads, and only those whose value changed since
the previous step, are converted, once, as flat variables
(``facts.x`` is compiled as ``facts__x``: a rewrite outside string literals, after the
original condition was validated), and every program runs on that context. The binding is
set once per episode and the coverage map only when it changes.

Safety: conditions are CEL (non-Turing-complete, no I/O). CEL's ``matches`` uses Rust's
``regex`` crate, which guarantees linear-time matching and rejects backreferences and
look-around, so regexes from library files need no timeout. Nothing is Python-``eval``'d.
A condition that errors (e.g. a missing key) or returns a non-Boolean counts as 0 and is
counted in ``errors``; it never raises mid-episode.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cel
import numpy as np
from pydantic import BaseModel

from rubricgym.credit.trca import coverable_mask, coverage
from rubricgym.trca.library import Operator, OperatorLibrary

ROOTS = ("facts", "binding", "coverage")

_STRING = re.compile(
    r'[rRbB]{0,2}(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'
)
_BRACKET_FIELD = re.compile(r"(?<![\w.])(facts|binding|coverage)\s*\[\s*(['\"])([A-Za-z_]\w*)\2\s*\]")
_DOT_FIELD = re.compile(r"(?<![\w.])(facts|binding|coverage)\s*\.\s*([A-Za-z_]\w*)")
_BARE_ROOT = re.compile(r"(?<![\w.])(facts|binding|coverage)\b(?!\s*\.)")
_MACRO_VARS = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,(?:\s*([A-Za-z_]\w*)\s*,)?")


@dataclass(frozen=True)
class References:
    """What a condition reads, found by parsing ``facts.X`` / ``binding.Y`` / ``coverage.Z``."""

    facts: frozenset[str]
    binding: frozenset[str]
    coverage: frozenset[str]
    unknown_variables: frozenset[str]  # top-level names other than facts/binding/coverage
    whole_roots: frozenset[str]  # roots used without a literal field name (uncheckable)


def find_references(condition: str, program: cel.Program) -> References:
    """Field references of a condition (string literals are ignored)."""
    text = _BRACKET_FIELD.sub(lambda m: f"{m.group(1)}.{m.group(3)}", condition)
    text = _STRING.sub('""', text)
    fields: dict[str, set[str]] = {root: set() for root in ROOTS}
    for root, name in _DOT_FIELD.findall(text):
        fields[root].add(name)
    bound = {name for pair in _MACRO_VARS.findall(text) for name in pair if name}
    unknown = set(program.variables()) - set(ROOTS) - bound
    return References(
        facts=frozenset(fields["facts"]),
        binding=frozenset(fields["binding"]),
        coverage=frozenset(fields["coverage"]),
        unknown_variables=frozenset(unknown),
        whole_roots=frozenset(_BARE_ROOT.findall(text)),
    )


FLAT_PREFIX = "facts__"
_HAS_FACT = re.compile(r"(?<![\w.])has\(\s*facts\s*\.\s*([A-Za-z_]\w*)\s*\)")


def flatten_fact_access(condition: str) -> str:
    """``facts.x`` / ``facts["x"]`` -> ``facts__x`` outside string literals.

    ``has(facts.x)`` becomes ``true``: every fact a condition reads is always present
    (facts have defaults; absent dict keys are passed as null)."""
    condition = _outside_strings(condition, lambda code: _BRACKET_FIELD.sub(lambda m: f"{m.group(1)}.{m.group(3)}", code),
                                 keep_brackets=True)
    return _outside_strings(condition, _flatten_code)


def _outside_strings(text: str, rewrite: Any, keep_brackets: bool = False) -> str:
    """Apply ``rewrite`` to the code between string literals. With ``keep_brackets`` a
    ``root["field"]`` access is handed to ``rewrite`` whole (its quotes are not a literal)."""
    out, pos = [], 0
    spans = [m.span() for m in _STRING.finditer(text)]
    if keep_brackets:
        brackets = [m.span() for m in _BRACKET_FIELD.finditer(text)]
        spans = [(a, b) for a, b in spans if not any(x <= a and b <= y for x, y in brackets)]
    for start, end in spans:
        out.append(rewrite(text[pos:start]))
        out.append(text[start:end])
        pos = end
    out.append(rewrite(text[pos:]))
    return "".join(out)


def _flatten_code(code: str) -> str:
    code = _HAS_FACT.sub("true", code)
    return _DOT_FIELD.sub(lambda m: f"{FLAT_PREFIX}{m.group(2)}" if m.group(1) == "facts" else m.group(0), code)


_SCALAR_TYPES = frozenset({str, bool, int, float, type(None), list})


def _plain(value: Any) -> Any:
    if type(value) in _SCALAR_TYPES:  # the common case, checked first for speed
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return value


def as_mapping(obj: Mapping[str, Any] | BaseModel | None) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return obj


class CompiledLibrary:
    """A validated library with every condition compiled once (build via ``load_library``)."""

    def __init__(self, library: OperatorLibrary, programs: Sequence[cel.Program], refs: Sequence[References]):
        self.library = library
        self.operators: list[Operator] = list(library.operators)
        self.ids: list[str] = library.ids
        self.categories: list[str] = library.categories
        self.coverable = coverable_mask(self.categories)
        self.source_programs = list(programs)  # the conditions as written (validated)
        self.programs = [cel.compile(flatten_fact_access(op.condition)) for op in self.operators]
        self.references = list(refs)
        self.fact_fields: tuple[str, ...] = tuple(sorted(set().union(*(r.facts for r in refs))))
        self.fact_variables: tuple[str, ...] = tuple(FLAT_PREFIX + f for f in self.fact_fields)
        self.binding_fields: tuple[str, ...] = tuple(sorted(set().union(*(r.binding for r in refs))))
        self.uses_coverage = any(r.coverage for r in refs)

    @property
    def name(self) -> str:
        return self.library.name

    @property
    def num_operators(self) -> int:
        return len(self.ids)

    def episode(self, binding: Mapping[str, Any] | BaseModel | None) -> EpisodeJudge:
        return EpisodeJudge(self, binding)

    def judge_once(
        self,
        facts: Mapping[str, Any] | BaseModel,
        binding: Mapping[str, Any] | BaseModel | None,
        covered: Iterable[str] = (),
    ) -> np.ndarray:
        """One step's judgments with the named operators already covered (examples, tests)."""
        covered = set(covered)
        prior = np.array([1.0 if i in covered else 0.0 for i in self.ids]) * self.coverable
        return self.episode(binding).judge(facts, prior)

    def judge_episode(
        self, facts_sequence: Iterable[Mapping[str, Any] | BaseModel], binding: Mapping[str, Any] | BaseModel | None
    ) -> np.ndarray:
        """Judgments ``O[T, J]`` of a whole episode, coverage carried step to step."""
        judge = self.episode(binding)
        rows: list[np.ndarray] = []
        prior = np.zeros(self.num_operators)
        for facts in facts_sequence:
            row = judge.judge(facts, prior)
            rows.append(row)
            prior = coverage(row[None, :], self.coverable, prior)[-1]
        return np.array(rows, dtype=np.int8).reshape(len(rows), self.num_operators)


class EpisodeJudge:
    """Judges one episode's steps in order, reusing one CEL context."""

    def __init__(self, compiled: CompiledLibrary, binding: Mapping[str, Any] | BaseModel | None):
        self.compiled = compiled
        self.errors: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}
        self._context = cel.Context()
        bind = as_mapping(binding)
        self._context.add_variable("binding", {k: _plain(bind.get(k)) for k in compiled.binding_fields})
        self._covered_key: tuple[str, ...] | None = None
        self._last_values: list[Any] = [object()] * len(compiled.fact_fields)  # forces the first update
        self._set_coverage(np.zeros(compiled.num_operators))

    def _set_coverage(self, prior: np.ndarray) -> None:
        if not self.compiled.uses_coverage:
            return
        covered = tuple(self.compiled.ids[k] for k in np.flatnonzero(np.asarray(prior) * self.compiled.coverable))
        if covered != self._covered_key:
            cov_ids = (i for i, ok in zip(self.compiled.ids, self.compiled.coverable, strict=True) if ok)
            self._context.add_variable("coverage", {i: i in covered for i in cov_ids})
            self._covered_key = covered

    def judge(self, facts: Mapping[str, Any] | BaseModel, prior_coverage: np.ndarray) -> np.ndarray:
        """``O[t, :]`` (int8) for one step given the coverage before it; never raises on data."""
        fields, names = self.compiled.fact_fields, self.compiled.fact_variables
        if isinstance(facts, BaseModel):
            values = [_plain(getattr(facts, f, None)) for f in fields]
        else:
            values = [_plain(facts.get(f)) for f in fields]
        # only re-convert what changed since the previous step (most facts repeat: "", false, [])
        last = self._last_values
        changed = {names[k]: v for k, v in enumerate(values) if type(v) is not type(last[k]) or v != last[k]}
        if changed:
            self._context.update(changed)
            self._last_values = values
        self._set_coverage(np.asarray(prior_coverage))
        out = []
        context = self._context
        for j, program in enumerate(self.compiled.programs):
            try:
                result = program.execute(context)
            except Exception as exc:  # CEL data errors: missing key, bad types, bad regex
                self._record(j, f"{type(exc).__name__}: {exc}")
                result = False
            if result is not True and result is not False:
                self._record(j, f"non-Boolean result {result!r}")
                result = False
            out.append(result)
        return np.array(out, dtype=np.int8)

    def _record(self, j: int, message: str) -> None:
        op = self.compiled.ids[j]
        self.errors[op] += 1
        self.last_error[op] = message[:500]
