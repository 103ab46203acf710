"""Credit assignment: pure functions over arrays (no I/O, models or envs).

Every formula of DESIGN.md §4 (TRCA) lives in ``rubricgym.credit.trca``; §5 (DRACO step
credit) in ``rubricgym.credit.draco``; plain GRPO in ``rubricgym.credit.grpo``.
"""
