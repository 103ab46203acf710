"""The parallel strategy is one object: read from the source (AST), no module of ``trainers/``
outside ``trainers/parallel/`` names an engine (FSDP, DeepSpeed, ZeRO, sharding), a concrete
strategy class, or branches on which strategy runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / "trainers"
PARALLEL = TRAINERS / "parallel"

ENGINE_NAME = re.compile(r"(?i)fsdp|deepspeed|shard|zero_stage|^_?zero$")
ENGINE_CLASS = re.compile(r"Zero(?=[A-Z])")
ENGINE_TEXT = re.compile(r"(?i)fsdp|deepspeed|zero-?[123]\b|\bzero_stage")
STRATEGY_ROOTS = {"parallel", "strategy"}  # what the trainer calls its strategy object


def outside_modules() -> list[Path]:
    return [p for p in sorted(TRAINERS.rglob("*.py")) if PARALLEL not in p.parents]


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (they may explain; they do not act)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def identifiers(node: ast.AST) -> list[str]:
    """Every name a node introduces or uses."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.name, *(node.asname and [node.asname] or [])]
    if isinstance(node, ast.ImportFrom) and node.module:
        return node.module.split(".")
    return []


def rooted_at_strategy(node: ast.AST) -> bool:
    """``self.parallel.plan...``, ``trainer.parallel.label``, ``strategy.x``: an expression
    that reads the strategy object itself (its methods' results are not inspected here;
    ``parallel is None``, whether one was given, is not a choice between strategies)."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None):
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            continue
        if isinstance(sub, ast.Attribute) and sub.attr in STRATEGY_ROOTS:
            return True
        if isinstance(sub, ast.Name) and sub.id in STRATEGY_ROOTS:
            return True
    return False


def problems(path: Path, source: str | None = None) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    docs = docstrings(tree)
    where = path.relative_to(ROOT)
    found = []
    for node in ast.walk(tree):
        for name in identifiers(node):
            if (ENGINE_NAME.search(name) or ENGINE_CLASS.search(name)
                    or (name.endswith("Strategy") and name != "ParallelStrategy")):
                found.append(f"{where}:{getattr(node, 'lineno', '?')}: names {name!r}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if ENGINE_TEXT.search(node.value):
                found.append(f"{where}:{node.lineno}: a string names an engine: {node.value[:60]!r}")
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) and rooted_at_strategy(node.test):
            found.append(f"{where}:{node.lineno}: branches on the strategy")
        if isinstance(node, ast.Match) and rooted_at_strategy(node.subject):
            found.append(f"{where}:{node.lineno}: branches on the strategy")
    return found


def test_no_module_outside_the_parallel_package_names_an_engine_or_branches_on_it():
    found = [p for path in outside_modules() for p in problems(path)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("if self.fsdp:\n    pass\n", "names 'fsdp'"),
    ("from rubricgym.trainers.parallel.zero import require_deepspeed\n", "names 'zero'"),
    ("x = FsdpStrategy(ranks, plan)\n", "names 'FsdpStrategy'"),
    ("m['deepspeed_zero'] = 2\n", "a string names an engine"),
    ("y = 1 if self.parallel.plan.engine == 'replicated' else 2\n", "branches on the strategy"),
    ("if trainer.parallel.label:\n    pass\n", "branches on the strategy"),
    ("self._zero = None\n", "names '_zero'"),
    ("class ZeroOptimizerStep:\n    pass\n", "names 'ZeroOptimizerStep'"),
])
def test_the_boundary_check_catches_each_kind(source, expected):
    """The check itself fails on each kind of leak (so a pass above means something)."""
    found = problems(TRAINERS / "probe.py", source)
    assert any(expected in p for p in found), found


def test_what_the_trainer_legitimately_says_is_not_flagged():
    source = ("optimizer.zero_grad(set_to_none=True)\nskip_zero_advantage = True\nt = torch.zeros(3)\n"
              "self.parallel.prepare_model(model, device)\nprint(trainer.parallel.start_line())\n"
              "if parallel is None:\n    parallel = single_process()\n")
    assert problems(TRAINERS / "probe.py", source) == []
