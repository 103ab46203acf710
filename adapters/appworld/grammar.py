"""Action grammar: one Python code block per step, as ``<action>...</action>`` or a fenced
```python block (the core parser's fence support)."""

from __future__ import annotations

from rubricgym import TagGrammar

CODE_GRAMMAR = TagGrammar(action_tags=("action",), fence_kind="python")
FENCE_LANGUAGES = frozenset({"", "python", "python3", "py"})


def code_of(action: str) -> str:
    """The code to run: an action's content, without a fence wrapped inside ``<action>``.

    Plain string operations (linear in the text): the action must open with a ```` ``` ````
    line naming python (or nothing) and end with ```` ``` ````; otherwise it is returned as is.
    """
    text = action.strip()
    if not (text.startswith("```") and text.endswith("```")):
        return action
    newline = text.find("\n")
    if newline < 0 or newline > len(text) - 3:
        return action
    if text[3:newline].strip(" \t").lower() not in FENCE_LANGUAGES:
        return action
    body = text[newline + 1 : -3].rstrip(" \t")
    return body[:-1] if body.endswith("\n") else body
