"""rubricgym: environments, rubric rewards and a GRPO trainer for LLM agents.

Run `rubricgym COMMAND --help` for a command's options."""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib import metadata

from rubricgym.registration import BenchmarkNotInstalled, discover
from rubricgym.secret_refs import install_log_redaction

# Each subcommand lives in the module that owns its feature; this file only routes (modules are
# imported lazily so --help stays fast). Benchmark plugins add their own (BenchmarkSpec.commands).
# subcommand -> (module exposing ``add_arguments(parser)`` and ``run(args) -> int``, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("rubricgym.demo", "play a benchmark's expert on its env and print each step's facts"),
    "library": ("rubricgym.trca.cli", "generate, validate, test and diff TRCA operator libraries"),
    "train": ("rubricgym.trainers.cli", "GRPO training with rubric rewards"),
    "study": ("rubricgym.trainers.study.cli", "sample efficiency of advantage estimators at matched trajectory budgets"),
    "eval": ("rubricgym.trainers.eval.cli", "measure an agent (endpoint, local model or your function) on an env, per-step credit included"),
    "judge": ("rubricgym.judges.cli", "score stored trajectories with an LLM rubric judge"),
    "report": ("rubricgym.report.cli", "HTML report of a run folder or a trajectory file"),
    "serve-env": ("rubricgym.remote.server", "serve an env over OpenEnv's protocol (WebSocket; loopback by default)"),
    "serve-llm": ("rubricgym.llm_server", "serve the packaged SmolLM2 on 127.0.0.1 (OpenAI-compatible, llama.cpp)"),
}


def version() -> str:
    """The installed distribution's version, as pip reports it."""
    try:
        return metadata.version("rubricgym")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
        return "(not installed: pip install -e .)"


def all_commands() -> dict[str, tuple[str, str]]:
    """The core commands plus those the registered benchmarks declare."""
    commands = dict(COMMANDS)
    for spec in discover().values():
        for command in spec.commands:
            commands.setdefault(command.name, (command.module, command.help))
    return commands


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = all_commands()
    parser = argparse.ArgumentParser(prog="rubricgym", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in commands.items():
        sub.add_parser(name, help=help_text, add_help=False)
    parser.add_argument("--version", action="store_true", help="print rubricgym's version and exit")
    if argv and argv[0] == "--version":
        print(f"rubricgym {version()}")
        return 0
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        parser.print_help()
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    name, rest = argv[0], argv[1:]
    install_log_redaction()  # keys a command reads never reach the log (its own handlers: see trainers/cli.py)
    module_name, help_text = commands[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        print(f"rubricgym {name}: not available ({exc}); see README for the extra to install", file=sys.stderr)
        return 2
    cmd_parser = argparse.ArgumentParser(prog=f"rubricgym {name}", description=help_text)
    module.add_arguments(cmd_parser)
    args = cmd_parser.parse_args(rest)
    try:
        return int(module.run(args) or 0)
    except (BenchmarkNotInstalled, FileNotFoundError) as exc:  # a benchmark's missing data or module: the fix, no traceback
        print(f"rubricgym {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
