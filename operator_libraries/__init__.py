"""Shipped TRCA operator libraries, one YAML file per benchmark (``rubricgym.operator_libraries``).

Validate one with ``rubricgym library validate PATH --env ENV_ID``; the format is in docs/trca.md.
"""

from __future__ import annotations

from pathlib import Path

import yaml

LIBRARY_DIR = Path(__file__).parent


def shipped_libraries() -> list[Path]:
    """Every library file shipped with rubricgym, sorted by name."""
    return sorted(p for p in LIBRARY_DIR.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def _benchmark_of(path: Path) -> str:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    return str(data.get("benchmark", "")) if isinstance(data, dict) else ""


def library_path(benchmark_or_name: str) -> Path:
    """The shipped library for a benchmark ("ALFWorld") or by file name ("alfworld", "alfworld.yaml").

    Raises ``LookupError`` naming what ships when there is none."""
    wanted = benchmark_or_name.strip().lower()
    libraries = shipped_libraries()
    for path in libraries:
        if wanted in (path.name.lower(), path.stem.lower()):
            return path
    from rubricgym.registration import UnknownBenchmark, get_spec

    try:
        spec = get_spec(benchmark_or_name.strip())
        if spec.operator_library is not None:
            return Path(spec.operator_library)
    except UnknownBenchmark:
        pass
    for path in libraries:
        if _benchmark_of(path).lower() == wanted:
            return path
    shipped = ", ".join(f"{p.name} ({_benchmark_of(p) or '?'})" for p in libraries) or "none"
    raise LookupError(
        f"no operator library ships for {benchmark_or_name!r} (shipped: {shipped}); "
        "pass reward='none', or a path to your own library (see docs/trca.md)"
    )
