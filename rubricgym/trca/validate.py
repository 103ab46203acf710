"""Load and validate operator libraries against an adapter's fact and binding schemas.

Every problem is collected (not just the first) and names the operator and what is wrong,
so ``rubricgym library validate`` can print a complete, actionable list.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import cel
import numpy as np
from pydantic import BaseModel, ValidationError

from rubricgym.adapter import TaskBinding
from rubricgym.contract import Facts, registered_model, registered_model_refs
from rubricgym.credit.trca import CATEGORIES, COVERABLE_CATEGORIES
from rubricgym.trca.cost import condition_cost
from rubricgym.trca.library import Operator, OperatorLibrary, read_library_file
from rubricgym.trca.operators import CompiledLibrary, References, find_references


class LibraryProblem(BaseModel):
    operator: str | None = None
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.operator or '<library>'}: [{self.kind}] {self.message}"


class LibraryError(ValueError):
    """A library failed validation; ``problems`` lists every reason."""

    def __init__(self, source: str, problems: list[LibraryProblem]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"operator library {source} is invalid ({len(problems)} problem(s)):\n{lines}")


def resolve_model(ref: str, base: type) -> type:
    """The registered model a library's ``'module:Class'`` reference names.

    Only models of registered benchmarks (built in or installed plugins) resolve; anything
    else is refused *without importing it*: a library file must never make rubricgym import
    (and so run) code of its choosing."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"model reference {ref!r} must look like 'package.module:ClassName'")
    model = registered_model(ref)
    if model is None:
        raise ValueError(f"model {ref!r} is not the facts or binding model of a registered benchmark "
                         f"(registered: {registered_model_refs()}); it was not imported")
    if not issubclass(model, base):
        raise ValueError(f"model {ref!r} is not a subclass of {base.__name__}")
    return model


def schema_fields(model: type[BaseModel]) -> set[str]:
    """Top-level property names in the model's exported JSON Schema."""
    return set(model.model_json_schema().get("properties", {}))


def _pydantic_problems(exc: ValidationError, data: dict[str, Any]) -> list[LibraryProblem]:
    ops = data.get("operators") if isinstance(data.get("operators"), list) else []
    out = []
    for err in exc.errors():
        loc = list(err["loc"])
        operator = None
        if len(loc) >= 2 and loc[0] == "operators" and isinstance(loc[1], int) and loc[1] < len(ops):
            raw = ops[loc[1]]
            operator = str(raw.get("id")) if isinstance(raw, dict) and raw.get("id") else f"operators[{loc[1]}]"
            loc = loc[2:]
        kind = "budget" if loc and loc[0] in ("budgets", "lambda", "lam", "gamma") else "format"
        where = ".".join(str(x) for x in loc) or "(top level)"
        out.append(LibraryProblem(operator=operator, kind=kind, message=f"{where}: {err['msg']}"))
    return out


def _well_formed_operators(raw: dict[str, Any]) -> list[Operator]:
    """The operators of a library that failed validation which are valid on their own."""
    ops = raw.get("operators") if isinstance(raw, dict) else None
    out = []
    for op in ops if isinstance(ops, list) else []:
        try:
            out.append(Operator.model_validate(op))
        except ValidationError:
            continue  # its problems are already listed
    return out


def _check_references(op_id: str, refs: References, reads: list[str], needs: list[str],
                      fact_names: set[str], binding_names: set[str], coverable_ids: set[str]) -> list[LibraryProblem]:
    p: list[LibraryProblem] = []
    for name in sorted(refs.facts - fact_names):
        p.append(LibraryProblem(operator=op_id, kind="unknown_fact",
                                message=f"condition reads facts.{name}, which the facts schema does not define"))
    for name in sorted(refs.binding - binding_names):
        p.append(LibraryProblem(operator=op_id, kind="unknown_binding",
                                message=f"condition reads binding.{name}, which the binding schema does not define"))
    for name in sorted(refs.coverage - coverable_ids):
        p.append(LibraryProblem(operator=op_id, kind="unknown_coverage",
                                message=f"coverage.{name} is not an Evidence/Execution operator of this library"))
    for name in sorted(refs.unknown_variables):
        p.append(LibraryProblem(operator=op_id, kind="unknown_variable",
                                message=f"unknown variable {name!r}; conditions may only read facts, binding, coverage"))
    for root in sorted(refs.whole_roots):
        p.append(LibraryProblem(operator=op_id, kind="unchecked_reference",
                                message=f"{root} is used without a literal field name; write {root}.<field>"))
    for name in sorted(set(reads) - fact_names):
        p.append(LibraryProblem(operator=op_id, kind="unknown_fact", message=f"reads lists {name!r}, not in the facts schema"))
    for name in sorted(set(needs) - binding_names):
        p.append(LibraryProblem(operator=op_id, kind="unknown_binding", message=f"needs lists {name!r}, not in the binding schema"))
    if set(reads) != set(refs.facts):
        p.append(LibraryProblem(operator=op_id, kind="reads_mismatch",
                                message=f"reads {sorted(set(reads))} but the condition reads facts {sorted(refs.facts)}"))
    if set(needs) != set(refs.binding):
        p.append(LibraryProblem(operator=op_id, kind="needs_mismatch",
                                message=f"needs {sorted(set(needs))} but the condition reads binding {sorted(refs.binding)}"))
    return p


def check_library(
    data: dict[str, Any] | OperatorLibrary,
    facts_model: type[Facts] | None = None,
    binding_model: type[TaskBinding] | None = None,
    benchmark: str | None = None,
) -> tuple[CompiledLibrary | None, list[LibraryProblem]]:
    """Validate a library; returns the compiled library (when there are no problems) and the problems.

    ``facts_model``/``binding_model`` come from the adapter (``--env``); when omitted they are
    imported from the library's own ``facts_model``/``binding_model`` references."""
    raw = data.model_dump(by_alias=True) if isinstance(data, OperatorLibrary) else data
    problems: list[LibraryProblem] = []
    lib: OperatorLibrary | None = None
    try:
        lib = OperatorLibrary.model_validate(raw)
    except ValidationError as exc:
        problems += _pydantic_problems(exc, raw)
    # a malformed part hides nothing else: the operators that are well-formed alone are checked too
    operators = lib.operators if lib is not None else _well_formed_operators(raw)

    if lib is not None and benchmark is not None and lib.benchmark != benchmark:
        problems.append(LibraryProblem(kind="benchmark",
                                       message=f"library is for benchmark {lib.benchmark!r}, the env is {benchmark!r}"))
    models: dict[str, type] = {}
    for key, given, base in (("facts_model", facts_model, Facts), ("binding_model", binding_model, TaskBinding)):
        ref = raw.get(key) if isinstance(raw.get(key), str) else ""
        declared = None
        if ref:
            try:
                declared = resolve_model(ref, base)
            except ValueError as exc:
                problems.append(LibraryProblem(kind="model", message=f"{key}: {exc}"))
        if given is not None and declared is not None and not issubclass(given, declared):
            problems.append(LibraryProblem(kind="model", message=f"{key} {ref!r} does not match the env's {given.__name__}"))
        models[key] = given or declared or base
    fact_names = schema_fields(models["facts_model"])
    binding_names = schema_fields(models["binding_model"])

    if lib is not None:
        for op_id, n in Counter(lib.ids).items():
            if n > 1:
                problems.append(LibraryProblem(operator=op_id, kind="duplicate_id", message=f"id used by {n} operators"))
        for category in CATEGORIES:
            if not lib.by_category(category):
                problems.append(LibraryProblem(kind="empty_category",
                                               message=f"no {category} operators (each category needs >= 1)"))
    coverable_ids = {op.id for op in operators if op.category in COVERABLE_CATEGORIES}

    programs: list[cel.Program] = []
    refs: list[References] = []
    for op in operators:
        try:
            program = cel.compile(op.condition)
        except Exception as exc:
            problems.append(LibraryProblem(operator=op.id, kind="syntax", message=f"condition does not compile: {exc}"))
            continue
        problems += [LibraryProblem(operator=op.id, kind=kind, message=message)  # bounded before any example runs
                     for kind, message in condition_cost(op.condition).problems]
        ref = find_references(op.condition, program)
        problems += _check_references(op.id, ref, op.reads, op.needs, fact_names, binding_names, coverable_ids)
        if not any(ex.expected for ex in op.examples):
            problems.append(LibraryProblem(operator=op.id, kind="missing_example", message="needs at least one positive example (expected: true)"))
        if all(ex.expected for ex in op.examples):
            problems.append(LibraryProblem(operator=op.id, kind="missing_example", message="needs at least one negative example (expected: false)"))
        programs.append(program)
        refs.append(ref)
    if problems or lib is None:
        return None, problems

    compiled = CompiledLibrary(lib, programs, refs)
    problems += _check_examples(compiled, models["facts_model"], models["binding_model"], coverable_ids)
    return (None if problems else compiled), problems


def _check_examples(compiled: CompiledLibrary, facts_model: type[Facts], binding_model: type[TaskBinding],
                    coverable_ids: set[str]) -> list[LibraryProblem]:
    problems: list[LibraryProblem] = []
    erred: set[str] = set()  # an erring condition is reported once, against itself
    for j, op in enumerate(compiled.operators):
        for k, ex in enumerate(op.examples):
            label = f"example {k + 1} (expected {str(ex.expected).lower()})"
            try:
                facts = facts_model.model_validate(ex.facts)
                binding = binding_model.model_validate(ex.binding).model_dump(mode="json")
            except ValidationError as exc:
                msg = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                problems.append(LibraryProblem(operator=op.id, kind="example_invalid", message=f"{label}: {msg}"))
                continue
            bad_cov = sorted(set(ex.coverage) - coverable_ids)
            if bad_cov:
                problems.append(LibraryProblem(operator=op.id, kind="example_invalid",
                                               message=f"{label}: coverage names non-coverable/unknown operators {bad_cov}"))
                continue
            judge = compiled.episode(binding)
            prior = np.array([1.0 if i in ex.coverage else 0.0 for i in compiled.ids])
            got = bool(judge.judge(facts, prior)[j])
            for bad in sorted(set(judge.errors) - erred):
                erred.add(bad)
                where = label if bad == op.id else f"on {label} of {op.id}"
                problems.append(LibraryProblem(operator=bad, kind="example_error",
                                               message=f"{where}: condition raised {judge.last_error[bad]}"))
            if judge.errors.get(op.id):
                continue
            if got != ex.expected:
                problems.append(LibraryProblem(operator=op.id, kind="example_failed",
                                               message=f"{label}: condition returned {str(got).lower()}"))
    return problems


_CACHE: dict[tuple[Any, ...], CompiledLibrary] = {}


def load_library(
    source: str | os.PathLike[str] | dict[str, Any] | OperatorLibrary,
    facts_model: type[Facts] | None = None,
    binding_model: type[TaskBinding] | None = None,
    benchmark: str | None = None,
) -> CompiledLibrary:
    """A validated, compiled library from a file (cached per file version) or in-memory data.

    Raises ``LibraryError`` listing every problem."""
    if isinstance(source, dict | OperatorLibrary):
        compiled, problems = check_library(source, facts_model, binding_model, benchmark)
        if compiled is None:
            raise LibraryError("<in-memory>", problems)
        return compiled
    path = Path(source).resolve()
    try:
        stat = path.stat()
    except OSError as exc:
        raise FileNotFoundError(f"operator library {path}: {exc.strerror or exc}") from exc
    key = (str(path), stat.st_mtime_ns, stat.st_size, facts_model, binding_model, benchmark)
    if key not in _CACHE:
        compiled, problems = check_library(read_library_file(path), facts_model, binding_model, benchmark)
        if compiled is None:
            raise LibraryError(str(path), problems)
        _CACHE[key] = compiled
    return _CACHE[key]
