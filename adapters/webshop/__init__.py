"""WebShop: task binder only; the engine adapter for this benchmark is not implemented yet.

``bind_task(instruction)`` turns a WebShop goal instruction into a ``WebShopBinding``
(product type, attributes, options, price bound) with deterministic rules, no model.
"""

from rubricgym.adapters.webshop.binder import bind_task
from rubricgym.adapters.webshop.facts import WebShopBinding

__all__ = ["WebShopBinding", "bind_task"]
