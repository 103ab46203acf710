"""The package's source modules by dotted name, for the tests that read the tree as text
(architecture rules, docstring references): the repository's folders install under
``rubricgym`` (setup.py maps them)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"rubricgym": "rubricgym", "adapters": "rubricgym.adapters", "trainers": "rubricgym.trainers",
           "operator_libraries": "rubricgym.operator_libraries"}


def source_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the installed folders."""
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found
