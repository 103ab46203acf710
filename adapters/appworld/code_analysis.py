"""Static facts about one agent code block, read with ``ast`` (never executed here).

Only what execution cannot show: syntax, call sites as written, loops, imports. Which calls
ran comes from AppWorld's request tracker (``observe.py``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

MAX_ARG_CHARS = 120


@dataclass(frozen=True)
class ApiCallSite:
    app: str
    api: str
    arguments: dict[str, str]
    in_loop: bool


@dataclass
class CodeAnalysis:
    syntax_ok: bool = True
    syntax_error: str = ""
    calls: list[ApiCallSite] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    has_loop: bool = False
    lines: int = 0

    def apps(self) -> list[str]:
        return sorted({c.app for c in self.calls})


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _argument_text(node: ast.AST) -> str:
    try:
        value: Any = ast.literal_eval(node)
        text = repr(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        text = "<expr:" + ast.unparse(node) + ">"
    return text if len(text) <= MAX_ARG_CHARS else text[: MAX_ARG_CHARS - 3] + "..."


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.calls: list[ApiCallSite] = []
        self.imports: list[str] = []
        self.loop_depth = 0
        self.has_loop = False

    def _loop(self, node: ast.AST) -> None:
        self.has_loop = True
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_For = visit_While = visit_AsyncFor = _loop
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _loop

    def visit_Import(self, node: ast.Import) -> None:
        self.imports += [a.name.split(".")[0] for a in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module:
            self.imports.append(node.module.split(".")[0])

    def visit_Call(self, node: ast.Call) -> None:
        path = _dotted(node.func)
        if path and len(path) == 3 and path[0] == "apis":
            args = {f"arg{i}": _argument_text(a) for i, a in enumerate(node.args)}
            args.update({kw.arg or "**": _argument_text(kw.value) for kw in node.keywords})
            self.calls.append(ApiCallSite(path[1], path[2], args, self.loop_depth > 0))
        self.generic_visit(node)


def analyze_code(code: str) -> CodeAnalysis:
    """API calls (``apis.<app>.<api>(...)``), imports and loops of a code block."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return CodeAnalysis(syntax_ok=False, syntax_error=f"{type(exc).__name__}: {exc}"[:300],
                            lines=code.count("\n") + 1)
    visitor = _Visitor()
    try:
        visitor.visit(tree)
    except RecursionError:
        pass
    return CodeAnalysis(calls=visitor.calls, imports=sorted(set(visitor.imports)), has_loop=visitor.has_loop,
                        lines=code.count("\n") + 1)
