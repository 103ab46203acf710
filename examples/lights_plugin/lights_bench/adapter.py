"""The engine behind rubricgym's adapter contract: about 30 lines."""

from rubricgym import Adapter, EngineReset, EngineStep, Outcome, ParsedAction
from lights_bench.binder import bind_task
from lights_bench.engine import TASKS, Lamps
from lights_bench.facts import LightsBinding, LightsFacts
from lights_bench.observe import step_facts, view


class LightsAdapter(Adapter):
    benchmark = "Lights"
    facts_model = LightsFacts
    binding_model = LightsBinding

    def task_ids(self) -> list[str]:
        return list(TASKS)

    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        self.lamps = Lamps(TASKS[task_id])
        self.instruction = "Switch on: " + ", ".join(self.lamps.on)
        return EngineReset(instruction=self.instruction, **view(self.lamps))

    def step(self, action: ParsedAction) -> EngineStep:
        lamp = (action.action or "").removeprefix("toggle ").strip()
        toggled = self.lamps.toggle(lamp)
        done = all(self.lamps.on.values())
        return EngineStep(**view(self.lamps), reward=float(done), terminated=done, accepted=toggled,
                          error_text="" if toggled else f"no lamp {lamp!r}",
                          benchmark_facts=step_facts(self.lamps, lamp, toggled))

    def binding(self) -> LightsBinding:
        return bind_task(self.instruction)

    def outcome(self) -> Outcome:
        return Outcome(success=all(self.lamps.on.values()))
