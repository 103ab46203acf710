"""Action grammar: one Python code block per step, as ``<action>...</action>`` or a fenced
```python block (the core parser's fence support)."""

from __future__ import annotations

import re

from rubricgym.parsing import TagGrammar

CODE_GRAMMAR = TagGrammar(action_tags=("action",), fence_kind="python")
_INNER_FENCE = re.compile(r"^\s*```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.DOTALL | re.IGNORECASE)


def code_of(action: str) -> str:
    """The code to run: an action's content, without a fence wrapped inside ``<action>``."""
    m = _INNER_FENCE.match(action)
    return m.group(1) if m else action
