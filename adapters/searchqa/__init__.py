"""SearchQA (Search-R1 protocol): task binder only; the engine adapter for this benchmark is not implemented yet.

``bind_task(question)`` turns a question into a ``SearchQABinding`` (answer format, target
entities, relation, constraints) with deterministic rules, no model. It takes only the
question: gold answers never reach the binding.
"""

from rubricgym.adapters.searchqa.binder import bind_task
from rubricgym.adapters.searchqa.facts import SearchQABinding

__all__ = ["SearchQABinding", "bind_task"]
