"""``rubricgym`` command line. Each subcommand lives in the module that owns its feature;
this file only routes (modules are imported lazily so ``--help`` stays fast)."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> module exposing ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("rubricgym.demo", "play bundled ALFWorld games and print each step's facts"),
    "library": ("rubricgym.trca.cli", "validate and inspect TRCA operator libraries"),
    "train": ("rubricgym.trainers.cli", "GRPO training with rubric rewards"),
    "judge": ("rubricgym.judges.cli", "score stored trajectories with an LLM rubric judge"),
    "appworld": ("rubricgym.adapters.appworld.cli", "build AppWorld's venv, data and servers"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="rubricgym", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        parser.print_help()
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    name, rest = argv[0], argv[1:]
    module_name, help_text = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        print(f"rubricgym {name}: not available ({exc}); see README for the extra to install", file=sys.stderr)
        return 2
    cmd_parser = argparse.ArgumentParser(prog=f"rubricgym {name}", description=help_text)
    module.add_arguments(cmd_parser)
    return int(module.run(cmd_parser.parse_args(rest)) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
