"""The binding WebShop operators read: what the goal asks for, never the goal product id."""

from __future__ import annotations

from pydantic import Field

from rubricgym.adapter import TaskBinding


class WebShopBinding(TaskBinding):
    """Extracted from the instruction text by ``bind_task`` (deterministic, no model).

    Empty fields mean the rules could not determine them; operators then return 0.
    """

    product_type: str = Field("", description="head noun phrase of the requested product, lower-case")
    attributes: list[str] = Field(default_factory=list, description="feature phrases, e.g. 'natural looking', 'machine wash'")
    options: dict[str, str] = Field(default_factory=dict, description="option name -> value, e.g. {'color': 'navy'}")
    price_upper: float | None = Field(None, description="price bound in dollars from 'price lower than X dollars'")
