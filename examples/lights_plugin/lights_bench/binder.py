"""The task binding: which lamps the instruction names (rules, no model)."""

from lights_bench.facts import LightsBinding


def bind_task(instruction: str) -> LightsBinding:
    return LightsBinding(lamps=instruction.removeprefix("Switch on: ").split(", "))
