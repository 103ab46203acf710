"""TRCA: deterministic transition-wise rubrics (docs/design.md §4).

An operator library (YAML, ``operator_libraries/``) holds Boolean CEL conditions over a
step's facts and the task binding; ``TRCAReward`` turns their judgments into step rewards
with the formulas of ``rubricgym.credit.trca``.
"""

from rubricgym.trca.library import Budgets, Operator, OperatorExample, OperatorLibrary
from rubricgym.trca.operators import CompiledLibrary, EpisodeJudge, find_references
from rubricgym.trca.validate import LibraryError, LibraryProblem, check_library, load_library
from rubricgym.trca.wrapper import TRCAConfig, TRCAReward

__all__ = [
    "Budgets",
    "CompiledLibrary",
    "EpisodeJudge",
    "LibraryError",
    "LibraryProblem",
    "Operator",
    "OperatorExample",
    "OperatorLibrary",
    "TRCAConfig",
    "TRCAReward",
    "check_library",
    "find_references",
    "load_library",
]
