"""WebShop: the WebShop text protocol (``search[...]`` / ``click[...]``) as rubricgym envs.

``WebShop-Rubric-v0`` / ``WebShop-Rubric-Eval-v0`` play a bundled WebShop-protocol engine
over a catalogue written for rubricgym (NOT the official WebShop data);
``WebShop-Real-Rubric-v0`` wraps WebShop's own text environment when it is installed.
``bind_task(instruction)`` turns a goal into a ``WebShopBinding`` (deterministic, no model).
"""

from rubricgym.adapters.webshop.binder import bind_task
from rubricgym.adapters.webshop.facts import WebShopBinding, WebShopFacts

__all__ = ["WebShopBinding", "WebShopFacts", "bind_task"]
