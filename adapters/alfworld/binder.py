"""Task binder: the instruction text -> ``ALFWorldBinding`` (deterministic, no model).

ALFWorld instructions come from alfworld's goal templates (``alfworld.gen.goal_library``),
e.g. "put a hot apple in fridge" or "examine the book with the desklamp". Each template is
matched exactly; human-written goals (``goal_desc_human_anns_prob`` > 0) fall back to
keyword rules, which leave a field empty rather than guess.
"""

from __future__ import annotations

import re

from rubricgym.adapters.alfworld.facts import ALFWorldBinding

_NAME = r"([a-z][a-z ]*?)"
# (task_type, transformation, quantity, pattern with named obj/recep/toggle groups)
_TEMPLATES: list[tuple[str, str, int, re.Pattern[str]]] = [
    (kind, transform, qty, re.compile(pattern))
    for kind, transform, qty, pattern in [
        ("clean", "clean", 1, rf"^put a clean {_NAME} in {_NAME}$"),
        ("clean", "clean", 1, rf"^clean some {_NAME} and put it in {_NAME}$"),
        ("heat", "heat", 1, rf"^put a hot {_NAME} in {_NAME}$"),
        ("heat", "heat", 1, rf"^heat some {_NAME} and put it in {_NAME}$"),
        ("cool", "cool", 1, rf"^put a cool {_NAME} in {_NAME}$"),
        ("cool", "cool", 1, rf"^cool some {_NAME} and put it in {_NAME}$"),
        ("pick_two", "", 2, rf"^put two {_NAME} in {_NAME}$"),
        ("pick_two", "", 2, rf"^find two {_NAME} and put them in {_NAME}$"),
        ("look", "light", 1, rf"^look at {_NAME} under the {_NAME}$"),
        ("look", "light", 1, rf"^examine the {_NAME} with the {_NAME}$"),
        ("pick", "", 1, rf"^put a {_NAME} in {_NAME}$"),
        ("pick", "", 1, rf"^put some {_NAME} on {_NAME}$"),
    ]
]
TASK_TYPE_OF_KIND = {
    "pick": "pick_and_place_simple",
    "look": "look_at_obj_in_light",
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
    "pick_two": "pick_two_obj_and_place",
}
KIND_OF_TASK_TYPE = {v: k for k, v in TASK_TYPE_OF_KIND.items()}
LIGHTS = ("desklamp", "floorlamp")


def task_text(instruction: str) -> str:
    """The goal sentence: text after the last 'Your task is to:', lower-cased, no final period."""
    text = instruction.rsplit("Your task is to:", 1)[-1]
    return " ".join(text.lower().split()).rstrip(" .")


def _squash(name: str) -> str:
    """'desk lamp' and 'desklamp' name the same ALFWorld class."""
    return name.replace(" ", "")


def _vocabulary() -> tuple[set[str], set[str]]:
    try:
        import alfworld.gen.constants as C  # loaded on use: alfworld sets process-wide state on import
    except ImportError:  # binder stays usable without the engine installed
        return set(), set()
    objects = {o.lower() for o in C.OBJECTS}
    receptacles = {r.lower() for r in C.RECEPTACLES} | {"sinkbasin", "bathtubbasin"}
    return objects, receptacles


def _fallback(text: str) -> ALFWorldBinding:
    """Keyword rules for free-form (human) goals; unknown fields stay empty."""
    objects, receptacles = _vocabulary()
    words = re.findall(r"[a-z]+", text)
    squashed = [_squash(" ".join(words[i:i + 2])) for i in range(len(words))]
    light = next((lamp for lamp in LIGHTS if lamp in squashed or lamp in words), "")
    if not light and re.search(r"\b(lamp|light)\b", text):
        light = "desklamp" if "desk" in words else ("floorlamp" if "floor" in words else "")
    transform = ""
    if re.search(r"\b(clean|wash|rinse)", text):
        transform = "clean"
    elif re.search(r"\b(hot|heat|warm|microwave)", text):
        transform = "heat"
    elif re.search(r"\b(cool|cold|chill|fridge|refrigerat)", text):
        transform = "cool"
    is_look = bool(light) or bool(re.search(r"\b(lamp|light)\b", text))
    quantity = 2 if re.search(r"\b(two|both|pair)\b", text) else 1
    movable = objects - receptacles
    mentioned = [c for w in words for c in (w, w[:-1] if w.endswith("s") else "") if c and c in movable]
    target = mentioned[0] if mentioned else ""
    dest = ""
    if not is_look:
        places = [w for w in words if w in receptacles and w != target]
        if transform == "cool":
            places = [p for p in places if p != "fridge"] or places
        if transform == "heat":
            places = [p for p in places if p != "microwave"] or places
        dest = places[-1] if places else ""
    if is_look:
        kind, transform = "look", "light"
    elif quantity == 2:
        kind, transform = "pick_two", ""
    else:
        kind = transform or "pick"
    return ALFWorldBinding(
        task_type=kind, target_type=target, transformation=transform, quantity=quantity if kind == "pick_two" else 1,
        destination_type=dest, light_type=light if kind == "look" else "",
    )


def bind_task(instruction: str) -> ALFWorldBinding:
    """Parse an ALFWorld instruction (or a whole initial observation) into its binding."""
    text = task_text(instruction)
    for kind, transform, quantity, pattern in _TEMPLATES:
        m = pattern.match(text)
        if not m:
            continue
        obj, second = _squash(m.group(1)), _squash(m.group(2))
        if kind == "look":
            return ALFWorldBinding(task_type=kind, target_type=obj, transformation=transform, quantity=1,
                                   destination_type="", light_type=second)
        return ALFWorldBinding(task_type=kind, target_type=obj, transformation=transform, quantity=quantity,
                               destination_type=second, light_type="")
    return _fallback(text)
