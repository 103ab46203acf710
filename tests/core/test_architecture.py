"""The tree's shape, checked by reading the source (AST), never by importing it.

* Imports go one way: no cycle among rubricgym's modules (module-level and function-local
  imports both count), and every core module imports only its own or lower layers:
  credit <- contract <- records <- estimators <- rewards/trca/judges <- env <-
  registration/benchmark <- tools (CLI, report). ``credit`` is pure functions of arrays: it
  imports no other rubricgym layer, so neither records nor the contract.
* Only the resolution module (``rubricgym.estimators.resolve``) interprets what kind of
  estimator a name is: nowhere else reads an ``Estimator``'s kind fields.
* A function-local import is kept only for an optional extra or lazy CLI loading, and says
  so in a comment; the core imports its own modules inside functions only in CLI modules.
* The core (``rubricgym/``) names no benchmark.
* Plugins (``adapters/``, ``examples/``) use the public API only: names listed in the
  ``__all__`` of the rubricgym module they import from, never another adapter.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from source_tree import ROOT, source_modules

# Core layers, lowest first: a module may import its own layer or a lower one. Prefixes match
# a module and its submodules.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("utilities", ("rubricgym.jsonl", "rubricgym.json_worker", "rubricgym.yaml_files", "rubricgym.atomic_files", "rubricgym.servers", "rubricgym.secret_refs",
                   "rubricgym.bounded_http", "rubricgym.process_state", "rubricgym.spaces", "rubricgym.models",
                   "rubricgym.untrusted")),
    ("credit", ("rubricgym.credit",)),
    ("contract", ("rubricgym.contract", "rubricgym.parsing")),
    ("adapter, records", ("rubricgym.adapter", "rubricgym.records", "rubricgym.prompts", "rubricgym.tokens",
                          "rubricgym.vector")),
    ("estimators", ("rubricgym.estimators",)),
    ("rewards", ("rubricgym.rewards", "rubricgym.trca.library", "rubricgym.trca.cost", "rubricgym.trca.operators",
                 "rubricgym.trca.validate", "rubricgym.trca.wrapper", "rubricgym.trca.coverage", "rubricgym.trca.step_groups",
                 "rubricgym.judges.cache", "rubricgym.judges.client", "rubricgym.judges.config",
                 "rubricgym.judges.ledger", "rubricgym.judges.pipeline", "rubricgym.judges.prompts",
                 "rubricgym.judges.rubric", "rubricgym.judges.schemas", "rubricgym.judges.structured",
                 "rubricgym.judges.wrapper")),
    ("env", ("rubricgym.env",)),
    ("registration", ("rubricgym.benchmark", "rubricgym.attach", "rubricgym.registration", "rubricgym.env_factories",
                      "rubricgym.tool_surface")),
    ("tools", ("rubricgym.demo", "rubricgym.llm_server", "rubricgym.cli", "rubricgym.report",
               "rubricgym.trca.cli", "rubricgym.trca.generate", "rubricgym.trca.recording", "rubricgym.judges.cli",
               "rubricgym.trca", "rubricgym.judges", "rubricgym.operator_libraries",
               "rubricgym.integrations", "rubricgym.remote")),
]
TOP = "rubricgym"  # the package itself imports everything it exports
CLI_MODULES = re.compile(r"(^|\.)cli$")
BENCHMARK_NAMES = re.compile(r"alfworld|appworld|webshop|searchqa|tau_?bench|tau2", re.IGNORECASE)
REASON = re.compile(r"#\s*\S")


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (resolved to a module of this tree, or the external top name)
    names: tuple[str, ...]  # names taken from the target (from-imports)
    local: bool  # inside a function
    line: int
    path: Path


MODULES = source_modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, local: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, _resolve(alias.name) or alias.name.split(".")[0], (), local,
                                 child.lineno, path)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package
                    for _ in range(child.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                names = tuple(a.name for a in child.names)
                submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
                target = _resolve(base) or base.split(".")[0]
                for sub in submodules:
                    yield Import(module, sub, (), local, child.lineno, path)
                attributes = tuple(n for n in names if f"{base}.{n}" not in MODULES)
                if attributes or not submodules:
                    yield Import(module, target, attributes, local, child.lineno, path)
            yield from visit(child, inner)

    yield from visit(tree, False)


ALL_IMPORTS = [imp for module, path in MODULES.items() for imp in imports_of(module, path)]
INTERNAL = [imp for imp in ALL_IMPORTS if imp.target in MODULES and imp.target != imp.source]


def cycles(edges: list[Import]) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for imp in edges:
        graph.setdefault(imp.source, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for number, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), number)
    return best[1] if best else None


def _core(module: str) -> bool:
    return module == TOP or (module.startswith("rubricgym.") and not module.startswith(
        ("rubricgym.adapters", "rubricgym.trainers", "rubricgym.operator_libraries")))


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _where(imp: Import) -> str:
    return f"{_show(imp.path)}:{imp.line}"


def test_credit_is_pure_functions_of_arrays() -> None:
    """``rubricgym.credit`` imports only itself and numpy: no records, contract, files or models."""
    found = [f"{_where(imp)}: {imp.source} imports {imp.target}" for imp in ALL_IMPORTS
             if imp.source.startswith("rubricgym.credit") and imp.target != imp.source
             and not imp.target.startswith("rubricgym.credit") and imp.target not in PURE_CREDIT_IMPORTS]
    assert not found, "credit/ must stay pure (arrays in, arrays out):\n" + "\n".join(found)


PURE_CREDIT_IMPORTS = {"__future__", "numpy", "collections", "dataclasses", "enum", "typing", "math"}
ESTIMATOR_KIND_FIELDS = {"needs", "lam", "judge_variant", "compute", "objective", "episode_term"}
RESOLUTION = "rubricgym.estimators.resolve"


def _kind_reads(path: Path) -> Iterator[tuple[int, str]]:
    """Attribute reads of an Estimator's kind fields on a name bound by ``get_estimator`` or on
    a ``.spec`` (``ResolvedEstimator.spec``), the ways code reaches a registry entry."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    entries: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id == "get_estimator" or (
                    isinstance(func, ast.Attribute) and func.attr == "get_estimator"):
                entries.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ESTIMATOR_KIND_FIELDS:
            base = node.value
            if (isinstance(base, ast.Name) and base.id in entries) or (isinstance(base, ast.Attribute)
                                                                       and base.attr == "spec"):
                yield node.lineno, ast.unparse(node)
            elif isinstance(base, ast.Call) and ast.unparse(base.func).endswith("get_estimator"):
                yield node.lineno, ast.unparse(node)


def test_only_the_resolution_module_reads_an_estimators_kind() -> None:
    found = [f"{_show(path)}:{line}: {text}" for module, path in MODULES.items()
             if module != RESOLUTION for line, text in _kind_reads(path)]
    assert not found, ("an estimator's kind is interpreted outside rubricgym.estimators.resolve (read the "
                       "ResolvedEstimator's properties instead):\n" + "\n".join(found))


def test_the_kind_reader_sees_a_read(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("est = get_estimator('trca')\nif est.needs: pass\nx = resolved.spec.lam\n"
                    "y = get_estimator('a').judge_variant\nz = other.needs\n")
    assert [line for line, _ in _kind_reads(path)] == [2, 3, 4]


def test_no_import_cycles() -> None:
    found = cycles(INTERNAL)
    assert not found, "import cycles (module-level and function-local imports count):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_finder_sees_a_cycle() -> None:
    p = Path("x.py")
    edges = [Import("a", "b", (), False, 1, p), Import("b", "c", (), True, 1, p), Import("c", "a", (), False, 1, p),
             Import("c", "d", (), False, 1, p)]
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles(edges[1:]) == []


def test_every_core_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if _core(m) and m != TOP and layer_of(m) is None)
    assert not missing, f"give these core modules a layer in LAYERS: {missing}"


def test_core_imports_point_down() -> None:
    upward = []
    for imp in INTERNAL:
        if not (_core(imp.source) and imp.source != TOP):
            continue
        if not _core(imp.target) or imp.target == TOP:
            upward.append(f"{_where(imp)}: {imp.source} imports {imp.target}, outside the core")
            continue
        src, dst = layer_of(imp.source), layer_of(imp.target)
        if src is not None and dst is not None and dst > src:
            upward.append(f"{_where(imp)}: {imp.source} ({LAYERS[src][0]}) imports {imp.target} ({LAYERS[dst][0]})")
    assert not upward, "imports reaching up a layer:\n" + "\n".join(upward)


def _reason_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_function_local_imports_say_why() -> None:
    problems = []
    for module, path in MODULES.items():
        lines = _reason_lines(path)
        local = sorted({(imp.line, imp.target) for imp in ALL_IMPORTS if imp.source == module and imp.local})
        explained: set[int] = set()
        for line, target in local:
            text = lines[line - 1]
            previous = lines[line - 2].strip() if line >= 2 else ""
            block = line - 1 in explained or (previous == "" and line - 2 in explained)
            if REASON.search(text.split("import", 1)[-1]) or previous.startswith("#") or block:
                explained.add(line)
            else:
                problems.append(f"{path.relative_to(ROOT)}:{line}: `{text.strip()}` has no reason "
                                "(say why in a comment: '# optional: the X extra' or '# lazy CLI: ...')")
            if target in MODULES and _core(module) and not CLI_MODULES.search(module):
                problems.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {target} inside a function "
                                "(only CLI modules load their own modules lazily)")
    assert not problems, "\n".join(problems)


def _code_strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.lineno, node.name
        elif isinstance(node, ast.alias):
            yield getattr(node, "lineno", 0), node.name


def test_the_core_names_no_benchmark() -> None:
    hits = []
    for module, path in MODULES.items():
        if not _core(module):
            continue
        for line, text in _code_strings(ast.parse(path.read_text(encoding="utf-8"))):
            if BENCHMARK_NAMES.search(text):
                hits.append(f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}")
    assert not hits, "the core names a benchmark (it must come from a plugin's spec):\n" + "\n".join(hits)


def _public_names(module: str) -> set[str] | None:
    path = MODULES.get(module)
    if path is None:
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}  # type: ignore[attr-defined]
    return set()


def plugin_problems(files: list[tuple[str | None, str, Path]]) -> list[str]:
    """``(own package, module name, path)`` of plugin files: their imports of rubricgym."""
    problems = []
    for own, module, path in files:
        for imp in imports_of(module, path):
            target = imp.target
            if not (target == TOP or target.startswith("rubricgym.")):
                continue
            if own is not None and (target == own or target.startswith(own + ".")):
                continue
            if target.startswith("rubricgym.adapters"):
                problems.append(f"{_where(imp)}: imports another adapter ({target})")
                continue
            public = _public_names(target)
            if public is None:
                problems.append(f"{_where(imp)}: imports {target}, not a rubricgym module")
                continue
            hidden = [n for n in imp.names if n != "*" and n not in public]
            if hidden or (not imp.names and target != TOP and not public):
                problems.append(f"{_where(imp)}: {target} does not list {hidden or target} in __all__ "
                                "(plugins use the public API only)")
    return problems


def _plugin_files() -> list[tuple[str | None, str, Path]]:
    files: list[tuple[str | None, str, Path]] = [
        (".".join(m.split(".")[:3]), m, p) for m, p in MODULES.items() if m.startswith("rubricgym.adapters.")]
    for path in sorted((ROOT / "examples").rglob("*.py")):
        package = path.relative_to(ROOT / "examples").parts
        files.append((None, ".".join(package).removesuffix(".py"), path))
    return files


def test_plugins_use_the_public_api_only() -> None:
    problems = plugin_problems(_plugin_files())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source, ok", [
    ("from rubricgym import Adapter, Facts\n", True),
    ("from rubricgym.jsonl import iter_json_lines\n", True),
    ("from rubricgym.env import RubricEnv\n", True),
    ("from rubricgym.contract import _DEFINED_FACTS\n", False),
    ("from rubricgym.adapters.webshop.engine import BundledShop\n", False),
])
def test_the_public_api_check_sees_private_names(tmp_path: Path, source: str, ok: bool) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    problems = plugin_problems([("rubricgym.adapters.alfworld", "rubricgym.adapters.alfworld.probe", path)])
    assert (not problems) == ok, problems
