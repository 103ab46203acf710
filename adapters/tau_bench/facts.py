"""The binding tau-bench operators read: what the user wants and the ids they will give."""

from __future__ import annotations

from pydantic import Field

from rubricgym.adapter import TaskBinding


class TauBenchBinding(TaskBinding):
    """Extracted from the user scenario by ``bind_task`` (deterministic, no model, no evaluation criteria).

    Empty fields mean the rules could not determine them; operators then return 0.
    """

    domain: str = Field("", description="retail | airline | telecom | mock, when the scenario states it")
    intent: str = Field("", description="the first request: cancel, modify, return, exchange, book, update, refund, ...")
    intents: list[str] = Field(default_factory=list, description="every request, in order of first mention")
    order_ids: list[str] = Field(default_factory=list, description="retail order ids, e.g. '#W1234567'")
    user_ids: list[str] = Field(default_factory=list, description="user ids, e.g. 'yusuf_rossi_9620'")
    reservation_ids: list[str] = Field(default_factory=list, description="airline reservation codes, e.g. 'EHGLP3'")
    flight_numbers: list[str] = Field(default_factory=list, description="e.g. 'HAT170'")
    emails: list[str] = Field(default_factory=list)
    zip_codes: list[str] = Field(default_factory=list)
    phone_numbers: list[str] = Field(default_factory=list)
    person_names: list[str] = Field(default_factory=list, description="from 'You are X Y' / 'Your name is X Y'")
    quoted_items: list[str] = Field(default_factory=list, description="product or item names given in quotes")
