"""``rubricgym library``: validate, show, generate, record trajectories for, test and diff
TRCA operator libraries (docs/authoring.md walks through them in order).

A LIBRARY argument is a file path, or a benchmark name / env id whose spec ships a library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rubricgym.benchmark import BenchmarkSpec
from rubricgym.contract import load_jsonl, save_jsonl
from rubricgym.judges.config import JudgeSettings
from rubricgym.registration import BenchmarkNotInstalled, UnknownBenchmark, get_spec, operator_library
from rubricgym.secret_refs import redact
from rubricgym.trca.coverage import diff_libraries, format_diff, format_test_report, library_coverage
from rubricgym.trca.generate import generate_library, read_interface
from rubricgym.trca.library import OperatorLibrary, read_library_file
from rubricgym.trca.recording import record_episodes
from rubricgym.trca.step_groups import format_step_groups, step_groups
from rubricgym.trca.validate import check_library

LIBRARY_HELP = "operator library: a YAML file, or the shipped one by benchmark name or env id"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="library_command", metavar="ACTION", required=True)
    v = sub.add_parser("validate", help="check a library against an env's fact and binding schemas")
    v.add_argument("path", help=LIBRARY_HELP)
    v.add_argument("--env", dest="env_id", default=None,
                   help="env id (or benchmark name) whose fact and binding schemas to check against; "
                        "default: the models the library names")
    s = sub.add_parser("show", help="print a library's operators, budgets and what each reads")
    s.add_argument("path", help=LIBRARY_HELP)

    g = sub.add_parser("generate", help="write a library with an LLM, validate it, regenerate rejected operators")
    g.add_argument("--env", dest="env_id", required=True, help="env id whose interface the library is written for")
    g.add_argument("--out", required=True, help="library file to write (YAML); the ledger goes to OUT.ledger.json")
    g.add_argument("--per-category", type=int, default=5, help="operators per category (default 5)")
    g.add_argument("--max-attempts", type=int, default=3, help="LLM calls in all, first one included (default 3)")
    g.add_argument("--max-tokens", type=int, default=4000, help="completion tokens per call")
    g.add_argument("--examples", type=int, default=2, help="real resets shown to the model (default 2)")
    g.add_argument("--name", help="library name (default: <benchmark>-generated)")
    g.add_argument("--kwargs", default="{}", help="JSON object of env keyword arguments")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint (default: RUBRICGYM_JUDGE_BASE_URL; "
                                      "`rubricgym serve-llm` starts a local one)")
    g.add_argument("--model", help="model name (default: RUBRICGYM_JUDGE_MODEL)")
    g.add_argument("--api-key-env", default=None, help="environment variable holding the API key")
    g.add_argument("--api-key-file", help="file whose first line is the API key")
    g.add_argument("--response-format", choices=["json_schema", "json_object_schema", "json_object", "none"],
                   help="json_object_schema for llama.cpp (grammar-constrained), json_schema for OpenAI/vLLM")
    g.add_argument("--cache-dir", help="persistent response cache directory")
    g.add_argument("--timeout", type=float, help="seconds per HTTP call")
    g.add_argument("--temperature", type=float)

    r = sub.add_parser("record", help="record expert or fuzzed episodes of an env (trajectories to test a library on)")
    r.add_argument("--env", dest="env_id", required=True, help="env id to play")
    r.add_argument("--policy", choices=["expert", "fuzz"], default="expert",
                   help="expert: the benchmark's expert player; fuzz: malformed, unknown, repeated and random actions")
    r.add_argument("--episodes", type=int, help="how many episodes (default: one per task)")
    r.add_argument("--max-steps", type=int, help="step limit per episode")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--kwargs", default="{}", help="JSON object of env keyword arguments")
    r.add_argument("--out", required=True, help="JSON-lines file of trajectories to write")
    r.add_argument("--append", action="store_true", help="append to OUT instead of replacing it")

    t = sub.add_parser("test", help="how often and where each operator fires on stored trajectories, and how "
                                    "their steps fall into TRCA's step groups")
    t.add_argument("path", help=LIBRARY_HELP)
    t.add_argument("--trajectories", required=True, action="append",
                   help="JSON-lines file of trajectories (repeatable), e.g. from `library record`")
    t.add_argument("--env", dest="env_id", default=None, help="env id or benchmark (default: the library's benchmark)")
    t.add_argument("--json", action="store_true", help="print the report as JSON")
    t.add_argument("--strict", action="store_true", help="exit 1 when an operator never fires or fires on every step")

    d = sub.add_parser("diff", help="where two libraries judge stored trajectories differently, step by step")
    d.add_argument("a", help=LIBRARY_HELP)
    d.add_argument("b", help=LIBRARY_HELP)
    d.add_argument("--trajectories", required=True, action="append", help="JSON-lines file of trajectories (repeatable)")
    d.add_argument("--env", dest="env_id", default=None, help="env id or benchmark (default: library A's benchmark)")
    d.add_argument("--limit", type=int, default=50, help="steps to print (--json prints all)")
    d.add_argument("--json", action="store_true", help="print the diff as JSON")


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def resolve_library(arg: str) -> Path:
    """A library file path, or the library a benchmark ships (by benchmark name or env id)."""
    path = Path(arg)
    if path.exists() or os.sep in arg:
        return path
    try:
        return operator_library(arg)
    except LookupError as exc:
        raise CliError(f"{arg!r} is neither a file nor a shipped library: {exc}") from None


def _spec_for(env_id: str | None, data: dict[str, Any]) -> BenchmarkSpec:
    name = env_id or str(data.get("benchmark", ""))
    try:
        return get_spec(name)
    except UnknownBenchmark as exc:
        raise CliError(f"{exc}; pass --env") from None


def _compiled(arg: str, env_id: str | None) -> tuple[Any, Any]:
    """(compiled library, spec) or CliError listing every validation problem."""
    path = resolve_library(arg)
    try:
        data = read_library_file(path)
    except (OSError, ValueError) as exc:
        raise CliError(str(exc)) from None
    spec = _spec_for(env_id, data)
    compiled, problems = check_library(data, spec.facts_model, spec.binding_model, spec.name)
    if compiled is None:
        raise CliError(f"{path} is invalid (run `rubricgym library validate {path}`):\n"
                       + "\n".join(f"  - {p}" for p in problems))
    return compiled, spec


def _trajectories(paths: list[str]) -> list[Any]:
    out = []
    for p in paths:
        try:
            out += load_jsonl(p)
        except (OSError, ValueError, RecursionError) as exc:  # a trajectory file is untrusted input
            raise CliError(f"cannot read trajectories {p}: {exc}") from None
    if not out:
        raise CliError("no trajectories in " + ", ".join(paths))
    return out


def _validate(args: argparse.Namespace) -> int:
    facts_model = binding_model = benchmark = None
    path = resolve_library(args.path)
    try:
        data = read_library_file(path)
        if args.env_id:
            spec = get_spec(args.env_id)  # the env id's (or benchmark's) schemas; no engine needed
            benchmark, facts_model, binding_model = spec.name, spec.facts_model, spec.binding_model
    except (OSError, ValueError, LookupError) as exc:
        raise CliError(str(exc)) from None
    compiled, problems = check_library(data, facts_model, binding_model, benchmark)
    if problems:
        print(f"{path}: INVALID ({len(problems)} problem(s))", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    assert compiled is not None
    lib = compiled.library
    counts = ", ".join(f"{len(lib.by_category(c))} {c}" for c in ("evidence", "invalidity", "execution"))
    examples = sum(len(op.examples) for op in lib.operators)
    against = f" against {args.env_id}" if args.env_id else ""
    print(f"{path}: OK{against}: library {lib.name!r} ({lib.benchmark}), {counts}; {examples} examples pass")
    return 0


def _show(args: argparse.Namespace) -> int:


    try:
        lib = OperatorLibrary.model_validate(read_library_file(resolve_library(args.path)))
    except (OSError, ValueError, ValidationError) as exc:
        raise CliError(str(exc)) from None
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


def _env_kwargs(text: str) -> dict[str, Any]:
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--kwargs is not JSON: {exc}") from None
    if not isinstance(kwargs, dict):
        raise CliError("--kwargs must be a JSON object")
    return kwargs


def _generate(args: argparse.Namespace) -> int:


    try:
        spec = get_spec(args.env_id)
        overrides = {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                     "api_key_file": args.api_key_file, "response_format": args.response_format,
                     "cache_dir": args.cache_dir, "timeout_s": args.timeout, "temperature": args.temperature}
        settings = JudgeSettings(**{k: v for k, v in overrides.items() if v is not None})
    except (UnknownBenchmark, ValidationError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if not settings.base_url:
        raise CliError("no LLM endpoint: pass --base-url or set RUBRICGYM_JUDGE_BASE_URL "
                       "(`rubricgym serve-llm` starts a local one and prints both)")
    kwargs = _env_kwargs(args.kwargs)
    print(f"reading {args.env_id}'s interface: schemas, action grammar, {args.examples} real reset(s)", file=sys.stderr)
    try:
        interface = read_interface(args.env_id, args.examples, kwargs)
    except (BenchmarkNotInstalled, ImportError, LookupError, ValueError, RuntimeError) as exc:
        raise CliError(f"cannot start {args.env_id}: {exc}") from None
    out = Path(args.out)
    ledger_path = out.with_name(out.name + ".ledger.json")
    result = generate_library(spec, settings, interface.grammar, interface.tasks, per_category=args.per_category,
                              max_attempts=args.max_attempts, max_tokens=args.max_tokens, name=args.name,
                              progress=lambda text: print(text, file=sys.stderr, flush=True))
    out.parent.mkdir(parents=True, exist_ok=True)
    document = result.library if result.library is not None else result.candidate
    if document is not None:
        out.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
    ledger = {"settings": settings.public_dump(), **result.model_dump(mode="json", exclude={"library", "candidate"})}
    ledger_path.write_text(json.dumps(ledger, indent=2), encoding="utf-8")
    total = result.total
    cost = (f"{len(result.attempts)} attempt(s), {total.get('calls', 0)} call(s), {total.get('cache_hits', 0)} cache hit(s), "
            f"{total.get('prompt_tokens', 0)}+{total.get('completion_tokens', 0)} tokens, ${total.get('cost_usd', 0.0):.4f}")
    if result.dropped:
        print(f"dropped {len(result.dropped)} operator(s) still invalid after {args.max_attempts} attempt(s): "
              + ", ".join(r.id for r in result.dropped), file=sys.stderr)
    if result.library is None:
        where = f"; the last candidate is in {out}" if document is not None else ""
        print(f"no valid library{where} ({cost}); ledger {ledger_path}", file=sys.stderr)
        for p in result.problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    counts = ", ".join(f"{sum(op['category'] == c for op in result.library['operators'])} {c}"
                       for c in ("evidence", "invalidity", "execution"))
    print(f"wrote {out}: valid library {result.library['name']!r} ({counts}); {cost}; ledger {ledger_path}")
    print(f"next: rubricgym library record --env {args.env_id} --out expert.jsonl && "
          f"rubricgym library test {out} --trajectories expert.jsonl")
    return 0


def _record(args: argparse.Namespace) -> int:
    def progress(n: int, total: int, trajectory: Any) -> None:
        print(f"[{n}/{total}] {trajectory.task_id}: {trajectory.num_steps} steps, success={trajectory.outcome.success}",
              file=sys.stderr, flush=True)

    try:
        trajectories = record_episodes(args.env_id, args.policy, args.episodes, args.seed, args.max_steps,
                                       _env_kwargs(args.kwargs), progress=progress)
    except (BenchmarkNotInstalled, ImportError, LookupError, ValueError) as exc:
        raise CliError(str(exc)) from None
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_jsonl(args.out, trajectories, append=args.append)
    print(f"wrote {len(trajectories)} {args.policy} episode(s), {sum(t.num_steps for t in trajectories)} steps, "
          f"to {args.out}")
    return 0


def _test(args: argparse.Namespace) -> int:
    compiled, spec = _compiled(args.path, args.env_id)
    trajectories = _trajectories(args.trajectories)
    report = library_coverage(compiled, trajectories, spec.binding_model)
    groups = step_groups(trajectories)
    if args.json:
        print(json.dumps({**report.model_dump(mode="json"), "step_groups": groups.model_dump(mode="json")}, indent=2))
    else:
        print(format_test_report(report) + "\n\n" + format_step_groups(groups))
    return 1 if args.strict and report.flagged else 0


def _diff(args: argparse.Namespace) -> int:
    a, spec = _compiled(args.a, args.env_id)
    b, _ = _compiled(args.b, args.env_id or spec.name)
    diff = diff_libraries(a, b, _trajectories(args.trajectories), spec.binding_model)
    print(diff.model_dump_json(indent=2) if args.json else format_diff(diff, args.limit))
    return 0


ACTIONS = {"validate": _validate, "show": _show, "generate": _generate, "record": _record, "test": _test,
           "diff": _diff}


def run(args: argparse.Namespace) -> int:
    try:
        return ACTIONS[args.library_command](args)
    except CliError as exc:
        print(f"rubricgym library {args.library_command}: {redact(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `rubricgym library show ... | head`: the reader left; not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot raise again
        return 0
