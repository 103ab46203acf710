"""The engine (a dict of lamps) behind rubricgym's adapter contract: ~50 lines."""

from rubricgym import Adapter, EngineReset, EngineStep, Outcome, ParsedAction
from lights_bench.facts import LightsBinding, LightsFacts

TASKS = {"two": ["desk", "hall"], "three": ["desk", "hall", "porch"]}


def bind_task(instruction: str) -> LightsBinding:
    return LightsBinding(lamps=instruction.removeprefix("Switch on: ").split(", "))


class LightsAdapter(Adapter):
    benchmark = "Lights"
    facts_model = LightsFacts
    binding_model = LightsBinding

    def task_ids(self) -> list[str]:
        return list(TASKS)

    def _view(self) -> dict:
        text = ", ".join(f"{k}={'on' if v else 'off'}" for k, v in self.lamps.items())
        return {"observation": text, "state_signature": text, "entities": list(self.lamps),
                "admissible_actions": [f"toggle {k}" for k in self.lamps], "context_key": text}

    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        self.lamps = dict.fromkeys(TASKS[task_id], False)
        self.instruction = "Switch on: " + ", ".join(self.lamps)
        return EngineReset(instruction=self.instruction, **self._view())

    def step(self, action: ParsedAction) -> EngineStep:
        lamp = (action.action or "").removeprefix("toggle ").strip()
        if lamp not in self.lamps:
            return EngineStep(**self._view(), accepted=False, error_text=f"no lamp {lamp!r}",
                              benchmark_facts={"lamp": lamp, "lamps_on": sum(self.lamps.values())})
        self.lamps[lamp] = not self.lamps[lamp]
        done = all(self.lamps.values())
        return EngineStep(**self._view(), reward=float(done), terminated=done, benchmark_facts={
            "lamp": lamp, "turned_on": self.lamps[lamp], "turned_off": not self.lamps[lamp],
            "lamps_on": sum(self.lamps.values())})

    def binding(self) -> LightsBinding:
        return bind_task(self.instruction)

    def outcome(self) -> Outcome:
        return Outcome(success=all(self.lamps.values()))


def expert(adapter: LightsAdapter) -> list[str]:
    return [f"toggle {k}" for k, on in adapter.lamps.items() if not on]
