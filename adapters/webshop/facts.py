"""WebShop's observable facts and the binding its operators read.

Facts come from the page text, the page's clickables and the agent's own actions
(``observe.py``); nothing reads the goal product, its options or the purchase reward.
The binding is what the goal asks for, never the goal product id.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rubricgym import Facts, TaskBinding


class WebShopFacts(Facts):
    benchmark: ClassVar[str] = "WebShop"

    action_kind: str = Field("", description="search | click | other (not search[...]/click[...] with an argument)")
    action_arg: str = Field("", description="the lower-cased argument of search[...] or click[...]")
    click_rejected: bool = Field(False, description="click[...] of a text that is not clickable on the page (a no-op)")
    first_event: bool = Field(False, description="this step's event happens for the first time this episode: a search's "
                              "keywords, a results page, a product's item page or one of its sub-pages, an option "
                              "value chosen for the product, the purchase (Evidence is new information)")
    page: str = Field("", description="page after the step: search | results | item | description | features | reviews | attributes | done")
    query: str = Field("", description="keywords of the current search ('' on the search page)")
    results_page: int = Field(0, description="results page number (0 off the results page)")
    total_results: int = Field(0, description="'Total results' of the current search page")
    listed_products: list[str] = Field(default_factory=list, description="product ids (lower-case) listed on the page")
    listed_titles: list[str] = Field(default_factory=list, description="lower-cased titles of the listed products")
    new_products: list[str] = Field(default_factory=list, description="listed product ids seen for the first time this episode")
    new_titles: list[str] = Field(default_factory=list, description="lower-cased titles of new_products")
    product: str = Field("", description="id (lower-case) of the open product on item and sub-pages, else ''")
    product_title: str = Field("", description="lower-cased title of the open item page")
    product_price: float | None = Field(None, description="price shown on the item page (first of a range)")
    option_groups: list[str] = Field(default_factory=list, description="option group names on the item page")
    option_values: list[str] = Field(default_factory=list, description="clickable option values on the item page")
    selected_options: dict[str, str] = Field(default_factory=dict, description="options the agent selected for the open product")
    selected_option: str = Field("", description="option value selected by this step, else ''")
    opened_product: bool = Field(False, description="this step opened a product from the results")
    entered_item: bool = Field(False, description="this step arrived at an item page from another page")
    section_text: str = Field("", description="lower-cased text of a Description/Features/Reviews page shown after the step")
    purchased: bool = Field(False, description="this step clicked Buy Now and the shop confirmed the purchase")
    purchased_product: str = Field("", description="id (lower-case) of the purchased product")
    purchased_title: str = Field("", description="lower-cased title of the purchased product")
    purchased_price: float | None = Field(None, description="price shown for the purchased product")
    stage: str = Field("", description="search | results | product | options_done | bought (options relative to the binding)")


class WebShopBinding(TaskBinding):
    """Extracted from the instruction text by ``bind_task`` (deterministic, no model).

    Empty fields mean the rules could not determine them; operators then return 0.
    """

    product_type: str = Field("", description="head noun phrase of the requested product, lower-case")
    attributes: list[str] = Field(default_factory=list, description="feature phrases, e.g. 'natural looking', 'machine wash'")
    options: dict[str, str] = Field(default_factory=dict, description="option name -> value, e.g. {'color': 'navy'}")
    price_upper: float | None = Field(None, description="price bound in dollars from 'price lower than X dollars'")
