"""``rubricgym library validate PATH --env ID`` and ``rubricgym library show PATH``."""

from __future__ import annotations

import argparse
import sys

from rubricgym.trca.library import read_library_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="library_command", metavar="ACTION", required=True)
    v = sub.add_parser("validate", help="check a library against an env's fact and binding schemas")
    v.add_argument("path", help="operator library file (YAML)")
    v.add_argument("--env", dest="env_id", default=None,
                   help="env id (or benchmark name) whose fact and binding schemas to check against; "
                        "default: the models the library names")
    s = sub.add_parser("show", help="print a library's operators, budgets and what each reads")
    s.add_argument("path", help="operator library file (YAML)")


def _validate(args: argparse.Namespace) -> int:
    from rubricgym.registration import get_spec
    from rubricgym.trca.validate import check_library

    facts_model = binding_model = benchmark = None
    try:
        data = read_library_file(args.path)
        if args.env_id:
            spec = get_spec(args.env_id)  # the env id's (or benchmark's) schemas; no engine needed
            benchmark, facts_model, binding_model = spec.name, spec.facts_model, spec.binding_model
    except (OSError, ValueError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    compiled, problems = check_library(data, facts_model, binding_model, benchmark)
    if problems:
        print(f"{args.path}: INVALID ({len(problems)} problem(s))", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    assert compiled is not None
    lib = compiled.library
    counts = ", ".join(f"{len(lib.by_category(c))} {c}" for c in ("evidence", "invalidity", "execution"))
    examples = sum(len(op.examples) for op in lib.operators)
    against = f" against {args.env_id}" if args.env_id else ""
    print(f"{args.path}: OK{against}: library {lib.name!r} ({lib.benchmark}), {counts}; {examples} examples pass")
    return 0


def _show(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from rubricgym.trca.library import OperatorLibrary

    try:
        lib = OperatorLibrary.model_validate(read_library_file(args.path))
    except (OSError, ValueError, ValidationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    b = lib.budgets
    print(f"{lib.name}  benchmark={lib.benchmark}  facts={lib.facts_model}  binding={lib.binding_model or '-'}")
    print(f"budgets r_evi={b.r_evi} r_inval={b.r_inval} r_exec={b.r_exec}  lambda={lib.lam}  gamma={lib.gamma}")
    for category in ("evidence", "invalidity", "execution"):
        ops = lib.by_category(category)
        print(f"\n{category} ({len(ops)})")
        for op in ops:
            print(f"  {op.id}: {op.description}")
            print(f"      if {' '.join(op.condition.split())}")
            print(f"      reads {', '.join(op.reads) or '-'}; needs {', '.join(op.needs) or '-'}; {len(op.examples)} examples")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.library_command == "validate":
        return _validate(args)
    return _show(args)
