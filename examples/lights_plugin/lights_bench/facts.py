"""What an operator may read: the step's observable facts and the task's binding."""

from typing import ClassVar

from pydantic import Field

from rubricgym import Facts, TaskBinding


class LightsFacts(Facts):
    benchmark: ClassVar[str] = "Lights"
    lamp: str = Field("", description="the lamp the action named")
    turned_on: bool = Field(False, description="the action switched a lamp on")
    turned_off: bool = Field(False, description="the action switched a lamp off")
    lamps_on: int = Field(0, description="lamps on after the step")


class LightsBinding(TaskBinding):
    lamps: list[str] = Field(default_factory=list, description="the lamps the task names")
