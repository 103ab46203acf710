"""Compiled operators: CEL programs judged over one step's facts, binding and prior coverage.

Two ways to judge a step, with identical results (a property test compares them):

* ``reference_judgments`` is the straightforward one: a fresh CEL context of nested maps
  (``facts``, ``binding``, ``coverage``) per call, every condition as written, one by one.
* ``EpisodeJudge`` is the fast one the wrappers use. Measured costs of the CEL bindings
  drive its design: converting a Python string or list to CEL costs over a microsecond
  (conversion tries several number types first); any change to a ``cel.Context`` rebuilds
  its environment on the next call, copying every variable (list and map values element by
  element); and running a compiled program on an unchanged context costs ~0.15 us plus the
  evaluation itself. So every field a condition reads (``facts.x``, ``binding.y``,
  ``coverage.z``) is a flat scalar variable with a short name, per step only the fact
  fields whose value changed are converted, coverage only when it changes, and all
  conditions run as ONE program per 16 operators, ``((c_0) ? 1 : 0) + ((c_1) ? 2 : 0) +
  ...``, whose integer result is decoded into the row. CEL evaluates each ``c_j`` exactly
  as it would alone; when anything in the batch errors or is not Boolean the whole sum
  errors, and that step is judged operator by operator instead (the erring operators then
  run on their own for the rest of the episode, so the others keep the fast path). A
  finished episode's context goes back to its library, and the next episode converts only
  the binding values and facts that differ from what it holds (a group's rollouts share a
  binding and start alike); contexts of live episodes are never shared.

Budgets (checked after the call, so the fast path pays two clock reads per step): an
operator whose evaluation took longer than ``budget_s`` of CPU time scores 0, is reported
once (``incidents``) and is disabled for the rest of the episode. Conditions also pass a
deterministic cost bound at validation (``rubricgym.trca.cost``); this catches the
data-dependent remainder (a huge list in the facts).

Safety: conditions are CEL (non-Turing-complete, no I/O). CEL's ``matches`` uses Rust's
``regex`` crate, which guarantees linear-time matching and rejects backreferences and
look-around, so regexes from library files need no timeout. Nothing is Python-``eval``'d.
A condition that errors (e.g. a missing key) or returns a non-Boolean counts as 0 and is
counted in ``errors``; it never raises mid-episode.
"""

from __future__ import annotations

import logging
import operator as _operator
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import cel
import numpy as np
from pydantic import BaseModel

from rubricgym.credit.trca import coverable_mask, coverage
from rubricgym.trca.library import Operator, OperatorLibrary

log = logging.getLogger(__name__)

ROOTS = ("facts", "binding", "coverage")
DEFAULT_BUDGET_S = 0.01
"""CPU seconds one operator may take on one step (~10,000x a typical condition)."""
BATCH_SIZE = 16  # operators per batched program (its result decodes through a 65536-row table)
RETIRED_CONTEXTS = 8  # contexts of finished episodes kept per library for the next ones

_STRING = re.compile(
    r'[rRbB]{0,2}(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'
)
_BRACKET_FIELD = re.compile(r"(?<![\w.])(facts|binding|coverage)\s*\[\s*(['\"])([A-Za-z_]\w*)\2\s*\]")
_DOT_FIELD = re.compile(r"(?<![\w.])(facts|binding|coverage)\s*\.\s*([A-Za-z_]\w*)")
_BARE_ROOT = re.compile(r"(?<![\w.])(facts|binding|coverage)\b(?!\s*\.)")
_MACRO_VARS = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,(?:\s*([A-Za-z_]\w*)\s*,)?")
_HAS_FIELD = re.compile(r"(?<![\w.])has\(\s*(facts|binding|coverage)\s*\.\s*([A-Za-z_]\w*)\s*\)")


@dataclass(frozen=True)
class References:
    """What a condition reads, found by parsing ``facts.X`` / ``binding.Y`` / ``coverage.Z``."""

    facts: frozenset[str]
    binding: frozenset[str]
    coverage: frozenset[str]
    unknown_variables: frozenset[str]  # top-level names other than facts/binding/coverage
    whole_roots: frozenset[str]  # roots used without a literal field name (uncheckable)


def macro_variables(condition: str) -> frozenset[str]:
    """Names a condition binds in comprehensions (``exists(x, ...)`` binds ``x``)."""
    text = _STRING.sub('""', condition)
    return frozenset(name for pair in _MACRO_VARS.findall(text) for name in pair if name)


def find_references(condition: str, program: cel.Program) -> References:
    """Field references of a condition (string literals are ignored)."""
    text = _BRACKET_FIELD.sub(lambda m: f"{m.group(1)}.{m.group(3)}", condition)
    text = _STRING.sub('""', text)
    fields: dict[str, set[str]] = {root: set() for root in ROOTS}
    for root, name in _DOT_FIELD.findall(text):
        fields[root].add(name)
    unknown = set(program.variables()) - set(ROOTS) - macro_variables(condition)
    return References(
        facts=frozenset(fields["facts"]),
        binding=frozenset(fields["binding"]),
        coverage=frozenset(fields["coverage"]),
        unknown_variables=frozenset(unknown),
        whole_roots=frozenset(_BARE_ROOT.findall(text)),
    )


FLAT_PREFIX = "facts__"


def flatten_fact_access(condition: str) -> str:
    """``facts.x`` / ``facts["x"]`` -> ``facts__x`` outside string literals (``has(facts.x)``
    -> ``true``); other roots keep their (dot) form."""
    return rewrite_access(condition, lambda root, field: f"{FLAT_PREFIX}{field}" if root == "facts" else None)


def rewrite_access(condition: str, name_of: Callable[[str, str], str | None]) -> str:
    """Replace ``root.field`` / ``root["field"]`` (outside string literals) by the variable
    ``name_of(root, field)``; ``None`` keeps ``root.field``. ``has(root.field)`` of a
    renamed field becomes ``true``: every field a condition reads is always present (facts
    and bindings have defaults; absent dict keys are passed as null)."""
    condition = _outside_strings(condition, lambda code: _BRACKET_FIELD.sub(lambda m: f"{m.group(1)}.{m.group(3)}", code),
                                 keep_brackets=True)

    def code(text: str) -> str:
        text = _HAS_FIELD.sub(lambda m: "true" if name_of(m.group(1), m.group(2)) else m.group(0), text)
        return _DOT_FIELD.sub(lambda m: name_of(m.group(1), m.group(2)) or f"{m.group(1)}.{m.group(2)}", text)

    return _outside_strings(condition, code)


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


def fact_values(facts: Mapping[str, Any] | BaseModel, fields: Sequence[str]) -> list[Any]:
    """The plain values of ``fields`` (absent ones are ``None``)."""
    if isinstance(facts, BaseModel):
        return [_plain(getattr(facts, f, None)) for f in fields]
    return [_plain(facts.get(f)) for f in fields]


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _as_judgment(result: Any) -> tuple[bool, str | None]:
    """(judgment, error message or None) for one condition's raw result."""
    if result is True or result is False:
        return result, None
    return False, f"non-Boolean result {result!r}"


def reference_judgments(
    compiled: CompiledLibrary,
    facts: Mapping[str, Any] | BaseModel,
    binding: Mapping[str, Any] | BaseModel | None,
    prior_coverage: Sequence[float] | np.ndarray,
) -> tuple[np.ndarray, dict[str, str]]:
    """The straightforward judgment of one step: a fresh context of nested maps and every
    condition as written, one by one. Returns the row and ``{operator id: error}``."""
    bind = as_mapping(binding)
    prior = np.asarray(prior_coverage, dtype=np.float64)
    context = {
        "facts": dict(zip(compiled.fact_fields, fact_values(facts, compiled.fact_fields), strict=True)),
        "binding": {k: _plain(bind.get(k)) for k in compiled.binding_fields},
        "coverage": {i: bool(prior[k]) for k, i in enumerate(compiled.ids) if compiled.coverable[k]},
    }
    row, errors = [], {}
    for op, program in zip(compiled.operators, compiled.source_programs, strict=True):
        try:
            value, error = _as_judgment(program.execute(context))
        except Exception as exc:  # CEL data errors: missing key, bad types, bad regex
            value, error = False, _error_text(exc)
        if error is not None:
            errors[op.id] = error
        row.append(value)
    return np.array(row, dtype=np.int8), errors


_TABLE: np.ndarray | None = None


def _bits_table() -> np.ndarray:
    """Row ``m`` holds the 16 low bits of ``m`` (int8), so a batch result decodes by indexing."""
    global _TABLE
    if _TABLE is None:
        _TABLE = ((np.arange(1 << BATCH_SIZE)[:, None] >> np.arange(BATCH_SIZE)) & 1).astype(np.int8)
    return _TABLE


@dataclass(frozen=True)
class Batch:
    """Operators judged together: one program per ``BATCH_SIZE`` of them."""

    indices: tuple[int, ...]
    programs: tuple[tuple[cel.Program, np.ndarray], ...]  # (program, operator indices of its bits)
    whole: bool  # one program judging every operator of the library, bit j = operator j
    rows: np.ndarray  # whole: row m of the result table is the judgment row of result m


class CompiledLibrary:
    """A validated library with every condition compiled once (build via ``load_library``)."""

    def __init__(self, library: OperatorLibrary, programs: Sequence[cel.Program], refs: Sequence[References]):
        self.library = library
        self.operators: list[Operator] = list(library.operators)
        self.ids: list[str] = library.ids
        self.categories: list[str] = library.categories
        self.coverable = coverable_mask(self.categories)
        self.source_programs = list(programs)  # the conditions as written (validated)
        self.references = list(refs)
        self.fact_fields: tuple[str, ...] = tuple(sorted(set().union(*(r.facts for r in refs))))
        self.binding_fields: tuple[str, ...] = tuple(sorted(set().union(*(r.binding for r in refs))))
        self.coverage_ids: tuple[str, ...] = tuple(sorted(set().union(*(r.coverage for r in refs))))
        self.uses_coverage = bool(self.coverage_ids)
        # short flat variable names (they are hashed and copied on every context rebuild)
        taken = set().union(*(set(p.variables()) for p in programs)) | set(ROOTS)
        prefix = "_"
        while any(name.startswith(prefix) for name in taken):
            prefix += "_"
        self.fact_variables = tuple(f"{prefix}f{k}" for k in range(len(self.fact_fields)))
        self.fact_positions = range(len(self.fact_fields))
        self.binding_variables = tuple(f"{prefix}b{k}" for k in range(len(self.binding_fields)))
        self.coverage_variables = tuple(f"{prefix}c{k}" for k in range(len(self.coverage_ids)))
        names = {("facts", f): v for f, v in zip(self.fact_fields, self.fact_variables, strict=True)}
        names |= {("binding", f): v for f, v in zip(self.binding_fields, self.binding_variables, strict=True)}
        names |= {("coverage", f): v for f, v in zip(self.coverage_ids, self.coverage_variables, strict=True)}
        self.flat_conditions = [rewrite_access(op.condition, lambda r, f: names.get((r, f))) for op in self.operators]
        self.programs = [cel.compile(text) for text in self.flat_conditions]  # one by one, flat variables
        index = {i: k for k, i in enumerate(self.ids)}
        self.coverage_index = np.array([index.get(i, -1) for i in self.coverage_ids], dtype=np.int64)
        self._batches: dict[frozenset[int], Batch] = {}
        self._retired: list[tuple[Any, ...]] = []  # contexts of finished episodes (see EpisodeJudge)
        getter = _operator.attrgetter(*self.fact_fields) if self.fact_fields else None
        if len(self.fact_fields) == 1:
            self._attr_values: Callable[[Any], tuple[Any, ...]] = lambda obj: (getter(obj),)  # type: ignore[misc]
        elif getter is not None:
            self._attr_values = getter  # type: ignore[assignment]
        else:
            self._attr_values = lambda obj: ()

    @property
    def name(self) -> str:
        return self.library.name

    @property
    def num_operators(self) -> int:
        return len(self.ids)

    def batch(self, indices: Iterable[int]) -> Batch:
        """The batched programs judging ``indices`` together (compiled once per set, ~1 ms)."""
        key = frozenset(indices)
        found = self._batches.get(key)
        if found is None:
            ordered = tuple(sorted(key))
            programs = []
            for start in range(0, len(ordered), BATCH_SIZE):
                chunk = ordered[start:start + BATCH_SIZE]
                text = " + ".join(f"(({self.flat_conditions[j]}) ? {1 << b} : 0)" for b, j in enumerate(chunk))
                programs.append((cel.compile(text), np.array(chunk, dtype=np.int64)))
            whole = len(programs) == 1 and ordered == tuple(range(self.num_operators))
            rows = _bits_table()[:, : self.num_operators] if whole else _bits_table()[:0]
            found = self._batches[key] = Batch(ordered, tuple(programs), whole, rows)
        return found

    def retire_context(self, state: tuple[Any, ...]) -> None:
        """Keep a finished episode's context (and the values it holds) for the next one."""
        if len(self._retired) < RETIRED_CONTEXTS:
            self._retired.append(state)

    def retired_context(self) -> tuple[Any, ...] | None:
        try:
            return self._retired.pop()
        except IndexError:
            return None

    def raw_fact_values(self, facts: Mapping[str, Any] | BaseModel) -> tuple[Any, ...]:
        """The read fields of ``facts``, not yet made plain (absent ones are ``None``)."""
        if isinstance(facts, BaseModel):
            try:
                return self._attr_values(facts)
            except AttributeError:
                return tuple(getattr(facts, f, None) for f in self.fact_fields)
        return tuple(map(facts.get, self.fact_fields))

    def episode(self, binding: Mapping[str, Any] | BaseModel | None, budget_s: float = DEFAULT_BUDGET_S) -> EpisodeJudge:
        return EpisodeJudge(self, binding, budget_s)

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


IncidentKind = Literal["error", "over_budget"]


class OperatorIncident(BaseModel):
    """A condition that failed in this episode, reported once per (operator, kind)."""

    operator: str
    kind: IncidentKind
    step: int
    message: str


_LOGGED: set[tuple[str, str, str]] = set()  # (library, operator, kind): logged once per process


class EpisodeJudge:
    """Judges one episode's steps in order, reusing one CEL context (see the module doc)."""

    def __init__(self, compiled: CompiledLibrary, binding: Mapping[str, Any] | BaseModel | None,
                 budget_s: float = DEFAULT_BUDGET_S):
        self.compiled = compiled
        self.budget_s = float(budget_s)
        self.errors: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}
        self.incidents: list[OperatorIncident] = []
        self.disabled: set[str] = set()  # over budget: scored 0 for the rest of the episode
        self.steps = 0
        self._reported: set[tuple[str, str]] = set()
        self._solo: list[int] = []  # operators judged one by one (they erred in a batch)
        self._batch = compiled.batch(range(compiled.num_operators))
        # a context an earlier episode left behind: only what differs from it is converted
        retired = compiled.retired_context()
        if retired is None:
            self._context, self._binding, self._covered = cel.Context(), [_UNSET] * len(compiled.binding_fields), None
            self._last: list[Any] = [_UNSET] * len(compiled.fact_fields)
        else:
            self._context, self._binding, self._covered, self._last = retired
        bind = as_mapping(binding)
        for k, (name, field) in enumerate(zip(compiled.binding_variables, compiled.binding_fields, strict=True)):
            value, old = _plain(bind.get(field)), self._binding[k]
            if value is not old and (type(value) is not type(old) or value != old):
                self._put(name, value)
                self._binding[k] = value.copy() if type(value) is list else value
        if compiled.uses_coverage:
            self._set_coverage(np.zeros(compiled.num_operators))

    def __del__(self) -> None:
        try:  # hand the context on: the next episode converts only what differs from it
            self.compiled.retire_context((self._context, self._binding, self._covered, self._last))
        except Exception:  # interpreter shutdown, or set-up never finished
            pass

    # ---- context ---------------------------------------------------------------------------
    def _put(self, name: str, value: Any) -> None:
        try:
            self._context.add_variable(name, value)
        except Exception:  # not representable in CEL: null, so conditions reading it err
            self._context.add_variable(name, None)

    def _update(self, changed: dict[str, Any]) -> None:
        try:
            self._context.update(changed)
        except Exception:
            for name, value in changed.items():
                self._put(name, value)

    def _set_coverage(self, prior: np.ndarray) -> None:
        key = (prior.dtype.num, prior.tobytes())
        if key == self._covered:
            return
        self._covered = key
        compiled = self.compiled
        values = {}
        for name, k in zip(compiled.coverage_variables, compiled.coverage_index.tolist(), strict=True):
            if k >= 0 and compiled.coverable[k]:
                values[name] = bool(prior[k])
        self._update(values)

    # ---- judging ---------------------------------------------------------------------------
    def judge(self, facts: Mapping[str, Any] | BaseModel, prior_coverage: np.ndarray) -> np.ndarray:
        """``O[t, :]`` (int8) for one step given the coverage before it; never raises on data."""
        compiled = self.compiled
        values = compiled.raw_fact_values(facts)
        last = self._last
        try:
            changed = [k for k, v, w in zip(compiled.fact_positions, values, last)
                       if v is not w and (v != w or type(v) is not type(w))]
        except Exception:  # a value whose comparison fails: convert everything
            changed = list(compiled.fact_positions)
        if changed:  # one add_variable per value is cheaper than one update() of them all
            names, add = compiled.fact_variables, self._context.add_variable
            for k in changed:
                v = values[k]
                try:
                    add(names[k], _plain(v))
                except Exception:  # not representable in CEL: null, so conditions reading it err
                    add(names[k], None)
                last[k] = v.copy() if type(v) is list else v  # a copy: in-place changes still count
        if compiled.uses_coverage:
            prior = prior_coverage if type(prior_coverage) is np.ndarray else np.asarray(prior_coverage, dtype=np.float64)
            self._set_coverage(prior)
        self.steps += 1
        return self._run()

    def _run(self) -> np.ndarray:
        context, batch = self._context, self._batch
        start = time.perf_counter()
        try:
            if batch.whole:
                mask = batch.programs[0][0].execute(context)
                if type(mask) is not int:
                    raise TypeError("batch result is not an int")
                row = batch.rows[mask].copy()
            else:
                row = np.zeros(self.compiled.num_operators, dtype=np.int8)
                table = _bits_table()
                for program, idx in batch.programs:
                    mask = program.execute(context)
                    if type(mask) is not int:
                        raise TypeError("batch result is not an int")
                    row[idx] = table[mask, : len(idx)]
        except Exception:  # some condition erred or is not Boolean: judge one by one this step
            return self._one_by_one()
        elapsed = time.perf_counter() - start
        if elapsed > self.budget_s:  # wall time says maybe: re-time each on CPU to find who
            self._enforce_budget(batch.indices, row)
        for j in self._solo:
            row[j] = self._judge_alone(j)
        return row

    def _judge_alone(self, j: int) -> int:
        """One operator on its own: errors recorded, CPU time checked against the budget."""
        start = time.thread_time()
        try:
            value, error = _as_judgment(self.compiled.programs[j].execute(self._context))
        except Exception as exc:
            value, error = False, _error_text(exc)
        spent = time.thread_time() - start
        if error is not None:
            self._record(j, error)
        if spent > self.budget_s:
            self._over_budget(j, spent)
            return 0
        return int(value)

    def _one_by_one(self) -> np.ndarray:
        """The step judged operator by operator; the ones that erred leave the batch."""
        row = np.zeros(self.compiled.num_operators, dtype=np.int8)
        erred = []
        for j in self._batch.indices:
            before = self.errors[self.compiled.ids[j]]
            row[j] = self._judge_alone(j)
            if self.errors[self.compiled.ids[j]] != before:
                erred.append(j)
        for j in self._solo:
            row[j] = self._judge_alone(j)
        if erred:
            self._solo = sorted(set(self._solo) | set(erred))
            self._rebatch()
        return row

    def _enforce_budget(self, indices: Sequence[int], row: np.ndarray) -> None:
        for j in indices:
            start = time.thread_time()
            try:
                self.compiled.programs[j].execute(self._context)
            except Exception:
                pass
            spent = time.thread_time() - start
            if spent > self.budget_s:
                self._over_budget(j, spent)
                row[j] = 0

    def _over_budget(self, j: int, spent: float) -> None:
        op = self.compiled.ids[j]
        self.disabled.add(op)
        self._solo = [k for k in self._solo if k != j]
        self._report(op, "over_budget", f"evaluation took {spent * 1e3:.1f} ms of CPU, over the budget of "
                                        f"{self.budget_s * 1e3:.1f} ms: scored 0 and disabled for this episode")
        self._rebatch()

    def _rebatch(self) -> None:
        ids = self.compiled.ids
        keep = [j for j in range(len(ids)) if ids[j] not in self.disabled and j not in self._solo]
        self._batch = self.compiled.batch(keep)

    def _record(self, j: int, message: str) -> None:
        op = self.compiled.ids[j]
        self.errors[op] += 1
        self.last_error[op] = message[:500]
        self._report(op, "error", message[:500])

    def _report(self, op: str, kind: IncidentKind, message: str) -> None:
        if (op, kind) in self._reported:
            return
        self._reported.add((op, kind))
        self.incidents.append(OperatorIncident(operator=op, kind=kind, step=self.steps - 1, message=message))
        key = (self.compiled.name, op, kind)
        if key not in _LOGGED:
            _LOGGED.add(key)
            log.warning("operator library %s: operator %s %s at step %d: %s", self.compiled.name, op,
                        "failed" if kind == "error" else "went over budget", self.steps - 1, message)


class _Unset:
    """A value equal to nothing, so the first step converts every fact."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


_UNSET = _Unset()
