"""ALFWorld on alfworld's real TextWorld engine (``gym.make("ALFWorld-Rubric-v0")``).

Importing this package does not import textworld/alfworld; the engine loads on reset.
"""

from rubricgym.adapters.alfworld.adapter import ALFWorldAdapter
from rubricgym.adapters.alfworld.binder import bind_task
from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts

__all__ = ["ALFWorldAdapter", "ALFWorldBinding", "ALFWorldFacts", "bind_task"]
