"""``model_checks.install()``: AppWorld's processes answer ``issubclass(X, <model>)`` by the MRO
where ``ABCMeta`` would walk every model; the answers must be ``ABCMeta``'s own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pydantic

import rubricgym.adapters.appworld
from rubricgym.adapters.appworld import model_checks
from rubricgym.adapters.appworld.paths import MODEL_CHECKS_SCRIPT, appworld_python, offline_data_root

SCRIPT = """
import abc, sys
sys.path.insert(0, {folder!r})
from model_checks import install
from pydantic import BaseModel, conint, constr
reference = abc.ABCMeta.__subclasscheck__  # the check the patch short-cuts
print("installed", install(), install())
from appworld import update_root
update_root({root!r})
from appworld.common.utils import import_models_module
models = [BaseModel] + [obj for app in ("spotify", "venmo", "admin") for obj in vars(import_models_module(app)).values()
                        if isinstance(obj, type) and issubclass(obj, BaseModel)]
others = [int, str, dict, list, conint(ge=0), constr(max_length=3), type("Plain", (), {{}}), abc.ABC]
pairs = [(m, s) for m in models for s in models + others]
print("pairs", len(pairs) > 1000, [(m.__name__, s.__name__) for m, s in pairs if issubclass(s, m) != reference(m, s)])
class Hooked(BaseModel):
    @classmethod
    def __subclasshook__(cls, subclass):
        return True if subclass is float else NotImplemented
print("hook", issubclass(float, Hooked), issubclass(bytes, Hooked))
class Plain(BaseModel):
    pass
before = issubclass(bytes, Plain)
Plain.register(bytes)
print("registered", before, issubclass(bytes, Plain), issubclass(bytearray, Plain))
"""


def test_every_answer_is_abcmetas_and_registration_or_a_hook_is_honoured():
    script = SCRIPT.format(folder=str(MODEL_CHECKS_SCRIPT.parent), root=str(offline_data_root()))
    done = subprocess.run([str(appworld_python()), "-c", script], check=False, capture_output=True, text=True,
                          timeout=300, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["installed True True", "pairs True []", "hook True False",
                                        "registered False True False"], done.stdout


def test_nothing_is_patched_outside_pydantic_v1():
    assert pydantic.VERSION.startswith("2.")  # the main venv's pydantic
    before = type(pydantic.BaseModel).__dict__.get("__subclasscheck__")
    assert model_checks.install() is False
    assert type(pydantic.BaseModel).__dict__.get("__subclasscheck__") is before


def test_every_appworld_process_script_installs_it_before_appworld_loads():
    folder = Path(rubricgym.adapters.appworld.__file__).parent
    for name in ("serve_app.py", "serve_apps.py", "evaluate_app.py"):
        text = (folder / name).read_text()
        assert text.index("install_model_checks()") < text.index("from appworld import update_root"), name
