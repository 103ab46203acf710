"""ALFWorld's observable facts and task binding.

Every field is derived from the command, the engine's text feedback and the admissible
commands; nothing reads the PDDL goal state, the planner, or the win flag.
Names are lower-case ALFWorld surface names ("apple 1", "fridge 1").
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rubricgym import Facts, TaskBinding


class ALFWorldFacts(Facts):
    benchmark: ClassVar[str] = "ALFWorld"

    verb: str = Field("", description="command verb: go, take, put, open, close, clean, heat, cool, use, examine, look, inventory")
    object: str = Field("", description="object named by the command, e.g. 'apple 1'")
    object_type: str = Field("", description="object class without its index, e.g. 'apple'")
    receptacle: str = Field("", description="receptacle named by the command, e.g. 'fridge 1'")
    receptacle_type: str = Field("", description="receptacle class without its index")
    location: str = Field("", description="where the agent is after the step")
    location_changed: bool = Field(False, description="the agent arrived somewhere new")
    inventory: list[str] = Field(default_factory=list, description="objects held after the step")
    seen_objects: list[str] = Field(default_factory=list, description="objects listed in this observation")
    seen_object_types: list[str] = Field(default_factory=list, description="classes of seen_objects")
    new_object_types: list[str] = Field(default_factory=list, description="classes of objects seen for the first time")
    picked_up: str = Field("", description="object taken this step")
    picked_up_type: str = ""
    placed: str = Field("", description="object put down this step")
    placed_type: str = ""
    placed_in_type: str = Field("", description="receptacle class it was put in/on")
    opened: str = Field("", description="receptacle opened this step")
    closed: str = Field("", description="receptacle closed this step")
    cleaned_type: str = Field("", description="class of object cleaned this step")
    heated_type: str = Field("", description="class of object heated this step")
    cooled_type: str = Field("", description="class of object cooled this step")
    toggled_type: str = Field("", description="class of appliance turned on this step")
    examined_type: str = Field("", description="class of object examined this step")
    nothing_happens: bool = Field(False, description="the engine answered 'Nothing happens.'")
    num_admissible: int = Field(0, description="admissible commands after the step")
    # added with the engine adapter (same sources: command, feedback, admissible commands)
    first_visit: bool = Field(False, description="the agent arrived at a receptacle it had not visited this episode")
    held_states: list[str] = Field(default_factory=list, description="observed states (clean, hot, cool) of held objects")
    picked_from_type: str = Field("", description="receptacle class the object was taken from")
    placed_states: list[str] = Field(default_factory=list, description="observed states of the object put down")
    placed_type_count: int = Field(0, description="objects of placed_type seen in that receptacle after the put")
    lamp_on_here: bool = Field(False, description="a lamp seen turned on stands at the agent's location")
    revisited: bool = Field(False, description=(
        "the step changed the situation back to one this episode had already been in (location, held objects, "
        "open receptacles, object states and where each object was seen): a loop, e.g. taking an object and "
        "putting it back, or shuttling between two places already seen"))
    stage: str = Field("", description="searching | found | holding | transformed | placed[N] | lit, relative to the binding")


class ALFWorldBinding(TaskBinding):
    """Extracted from the instruction text by ``bind_task`` (deterministic, no model)."""

    task_type: str = Field("", description="pick | clean | heat | cool | look | pick_two")
    target_type: str = Field("", description="object class to act on, e.g. 'apple'")
    transformation: str = Field("", description="'' | clean | heat | cool | light")
    quantity: int = Field(1, description="how many target objects must be placed")
    destination_type: str = Field("", description="receptacle class to place into ('' for look)")
    light_type: str = Field("", description="'desklamp' or 'floorlamp' for look tasks, else ''")
