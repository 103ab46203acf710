"""Static facts about one agent code block, read with ``ast`` (never executed here)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
AUTH_APIS = frozenset({"login", "logout"})
# Used when no generated API index is available (official data root without our index).
MUTATING_PREFIXES = ("create_", "add_", "update_", "delete_", "remove_", "send_", "like_", "unlike_", "follow_",
                     "unfollow_", "approve_", "deny_", "remind_", "complete_", "move_", "copy_", "post_",
                     "review_", "play_", "download_", "upload_", "assign_", "withdraw_", "mark_", "reply_",
                     "forward_", "archive_", "place_", "cancel_", "return_", "set_", "reset_", "write_")
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


def is_mutating(app: str, api: str, api_index: dict[str, dict[str, dict]] | None) -> bool:
    """Whether an API changes app state: its HTTP method when indexed, else its name."""
    if api in AUTH_APIS:
        return False
    if app == "supervisor":
        return api == "complete_task"
    method = ((api_index or {}).get(app) or {}).get(api, {}).get("method")
    if method:
        return method.upper() in MUTATING_METHODS
    return api.startswith(MUTATING_PREFIXES)
