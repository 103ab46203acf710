"""Every fact of a step, built from what the agent can see: the lamps after the action."""

from lights_bench.engine import Lamps


def view(lamps: Lamps) -> dict:
    text = ", ".join(f"{k}={'on' if v else 'off'}" for k, v in lamps.on.items())
    return {"observation": text, "state_signature": text, "entities": list(lamps.on),
            "admissible_actions": [f"toggle {k}" for k in lamps.on], "context_key": text}


def step_facts(lamps: Lamps, lamp: str, toggled: bool) -> dict:
    facts = {"lamp": lamp, "lamps_on": sum(lamps.on.values())}
    if toggled:
        facts.update(turned_on=lamps.on[lamp], turned_off=not lamps.on[lamp])
    return facts
