"""A fast ``issubclass(X, <pydantic model>)`` for AppWorld's processes (imported, in AppWorld's
venv, by ``serve_app.py``, ``serve_apps.py`` and ``evaluate_app.py`` before AppWorld loads).

AppWorld builds its FastAPI routes on pydantic v1, whose ``conint()``/``constr()`` make a new
class per field. FastAPI asks ``issubclass(that class, BaseModel)`` of each, and ``ABCMeta``
answers a no by walking every subclass of ``BaseModel`` (thousands of AppWorld models), so
the check is quadratic in the number of models: 2.4 of the 5.8 CPU seconds each process spends
building the routes of AppWorld's apps at its start (measured; 8.5 -> 6.1 CPU s a process).

The shortcut answers only what the MRO decides: a class whose metaclass is not pydantic's is
not a model, so it is a subclass of a model only if registered as a virtual one or if a
``__subclasshook__`` says so. Once any model class registers a virtual subclass
(``Model.register(X)``, which AppWorld never does: its models' ``register`` is a name registry
of their own), for a model with a hook, and for any other question, ``ABCMeta`` answers as
before.
"""

from __future__ import annotations

import abc
from typing import Any


def install() -> bool:
    """Patch pydantic v1's model metaclass; False (nothing changed) where pydantic is not v1
    or a virtual subclass was already registered with ``BaseModel``."""
    try:
        from pydantic import VERSION  # AppWorld's venv: this module runs there
        from pydantic.main import BaseModel, ModelMetaclass  # AppWorld's venv: this module runs there
    except ImportError:
        return False
    if "_rubricgym_fast_subclasscheck" in ModelMetaclass.__dict__:
        return True  # installed already
    if not str(VERSION).startswith("1.") or abc._get_dump(BaseModel)[0]:  # type: ignore[attr-defined]
        return False  # not v1, or BaseModel has a registry: keep ABCMeta's walk
    slow, register = abc.ABCMeta.__subclasscheck__, abc.ABCMeta.register
    registered = False  # set once a model registers a virtual subclass: then ABCMeta answers all

    def __subclasscheck__(cls: Any, subclass: Any) -> bool:
        if (not registered and isinstance(subclass, type) and not isinstance(subclass, ModelMetaclass)
                and not any("__subclasshook__" in vars(k) for k in cls.__mro__[:-1])):
            return False  # not a model class, nothing registered as a virtual one, no hook to ask
        return slow(cls, subclass)

    def register_virtual(cls: Any, subclass: Any) -> Any:
        nonlocal registered
        registered = True
        return register(cls, subclass)

    ModelMetaclass.__subclasscheck__ = __subclasscheck__  # type: ignore[method-assign]
    ModelMetaclass.register = register_virtual  # type: ignore[method-assign]
    ModelMetaclass._rubricgym_fast_subclasscheck = True  # type: ignore[attr-defined]
    return True
