"""Docstrings name things that exist (issue 50, item 3): every ``rubricgym.…`` path in a
docstring of the tree resolves to a module, or to a name defined in one; every ``CamelCase``
name in double backticks is defined (or imported) somewhere in the tree. Read from the source
(AST), never imported."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator

from source_tree import ROOT, source_modules

QUOTED = re.compile(r"``([A-Za-z_][\w.]*)``")
DOTTED = re.compile(r"\brubricgym(?:\.[A-Za-z_]\w*)+")
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+$")


MODULES = source_modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _defined(tree: ast.Module) -> dict[str, set[str]]:
    """Top-level names of a module, and each class's attribute names."""
    top: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
            members |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
            members |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            top[node.name] = members
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            top[node.name] = set()
        elif isinstance(node, ast.Assign):
            top.update({t.id: set() for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top[node.target.id] = set()
        elif isinstance(node, ast.ImportFrom):
            top.update({(a.asname or a.name): set() for a in node.names})
        elif isinstance(node, ast.Import):
            top.update({(a.asname or a.name).split(".")[0]: set() for a in node.names})
    return top


DEFINED = {name: _defined(tree) for name, tree in TREES.items()}
# the engines' and libraries' classes docstrings talk about (what they wrap): listed, so that a
# CamelCase name of the tree's own that no longer exists still fails
EXTERNAL = {"AlfredTWEnv", "AlfredDemangler", "AlfredInfos", "AppWorld", "TestTracker", "ModelCollection",
            "AgentGymEnv", "EnvironmentEvaluator", "WebAgentTextEnv", "BulletPoints", "LoRARequest", "Line2D",
            "AgentLoopOutput", "PddlEnv", "PddlState"}
ANYWHERE = {n for names in DEFINED.values() for n in names} | {
    m for names in DEFINED.values() for members in names.values() for m in members} | set(dir(builtins)) | EXTERNAL
ENTRY_POINT_GROUPS = set(re.findall(r'^\[project\.entry-points\."([\w.]+)"\]',
                                    (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE))


def resolves(path: str) -> bool:
    """``rubricgym.a.b`` is a module, ``rubricgym.a.B`` a name in module a (or its __init__'s
    imports), ``rubricgym.a.B.c`` an attribute of class B."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in MODULES:
            rest = parts[cut:]
            if not rest:
                return True
            names = DEFINED[module]
            if rest[0] not in names:
                return False
            return len(rest) == 1 or (len(rest) == 2 and (rest[1] in names[rest[0]] or not names[rest[0]]))
    return False


def _docstrings() -> Iterator[tuple[str, int, str]]:
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    line = node.body[0].lineno if node.body else 1
                    yield str(MODULES[module].relative_to(ROOT)), line, doc


def stale_references() -> list[str]:
    problems = []
    for where, line, doc in _docstrings():
        for path in DOTTED.findall(doc):
            path = path.rstrip(".")
            if path not in ENTRY_POINT_GROUPS and not resolves(path):
                problems.append(f"{where}:{line}: {path} does not exist")
        for name in QUOTED.findall(doc):
            head = name.split(".")[0]
            if CAMEL.match(head) and head not in ANYWHERE:
                problems.append(f"{where}:{line}: ``{name}`` is defined nowhere in the tree")
    return problems


def test_docstrings_name_what_exists():
    problems = stale_references()
    assert not problems, "docstrings name things that do not exist:\n" + "\n".join(problems)


def test_the_checker_sees_a_stale_name():
    assert resolves("rubricgym.estimators.resolve.resolve_estimator")
    assert resolves("rubricgym.trainers.rollout.StepSample.response_length")
    assert not resolves("rubricgym.trainers.env_workers.NoSuchThing")
    assert not resolves("rubricgym.credit.estimators")


def test_the_docs_name_what_exists():
    """The same for every ``rubricgym.…`` path in README.md and docs/*.md."""
    problems = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in DOTTED.findall(line):
                ref = ref.rstrip(".")
                if ref not in ENTRY_POINT_GROUPS and not resolves(ref):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {ref} does not exist")
    assert not problems, "the docs name things that do not exist:\n" + "\n".join(problems)
