"""What the agent can know about an ALFWorld room, built from text only.

``ObservedWorld`` reads each command and the engine's feedback (the sentences of
alfworld's ``alfred.twl2`` grammar) and keeps the agent's view: where it is, what it holds,
which receptacles it saw open, where it saw objects, and the object states its own actions
or ``examine`` revealed. It never reads the PDDL state, the planner or the win flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rubricgym.adapters.alfworld.facts import ALFWorldBinding

ENTITY = r"[a-z]+ \d+"
_ENTITY_RE = re.compile(rf"\b(?:a|an)\s+({ENTITY})\b")
STATE_WORDS = {"clean": "clean", "hot": "hot", "cool": "cool", "cold": "cool"}
TRANSFORM_STATE = {"clean": "clean", "heat": "hot", "cool": "cool"}

_COMMANDS: list[tuple[str, re.Pattern[str]]] = [
    ("go", re.compile(rf"^go to (?P<r>{ENTITY})$")),
    ("open", re.compile(rf"^open (?P<r>{ENTITY})$")),
    ("close", re.compile(rf"^close (?P<r>{ENTITY})$")),
    ("take", re.compile(rf"^take (?P<o>{ENTITY}) from (?P<r>{ENTITY})$")),
    ("put", re.compile(rf"^(?:move (?P<o>{ENTITY}) to|put (?P<o2>{ENTITY}) (?:in|on|into|in/on)) (?P<r>{ENTITY})$")),
    ("clean", re.compile(rf"^clean (?P<o>{ENTITY}) with (?P<r>{ENTITY})$")),
    ("heat", re.compile(rf"^heat (?P<o>{ENTITY}) with (?P<r>{ENTITY})$")),
    ("cool", re.compile(rf"^cool (?P<o>{ENTITY}) with (?P<r>{ENTITY})$")),
    ("slice", re.compile(rf"^slice (?P<o>{ENTITY}) with (?P<r>{ENTITY})$")),
    ("use", re.compile(rf"^use (?P<o>{ENTITY})$")),
    ("examine", re.compile(rf"^examine (?P<x>{ENTITY})$")),
    ("look", re.compile(r"^look$")),
    ("inventory", re.compile(r"^inventory$")),
    ("help", re.compile(r"^help$")),
]

_FEEDBACK = {
    "arrive": re.compile(rf"^You arrive at (?:loc \d+|(?P<r>{ENTITY}))\."),
    "open": re.compile(rf"^You open the (?P<r>{ENTITY})\."),
    "close": re.compile(rf"^You close the (?P<r>{ENTITY})\."),
    "take": re.compile(rf"^You pick up the (?P<o>{ENTITY}) from the (?P<r>{ENTITY})\."),
    "put": re.compile(rf"^You (?:move|put) the (?P<o>{ENTITY}) (?:to|in|on|in/on) the (?P<r>{ENTITY})\."),
    "clean": re.compile(rf"^You clean the (?P<o>{ENTITY}) using the (?P<r>{ENTITY})\."),
    "heat": re.compile(rf"^You heat the (?P<o>{ENTITY}) using the (?P<r>{ENTITY})\."),
    "cool": re.compile(rf"^You cool the (?P<o>{ENTITY}) using the (?P<r>{ENTITY})\."),
    "toggle_on": re.compile(rf"^You turn on the (?P<o>{ENTITY})\."),
    "toggle_off": re.compile(rf"^You turn off the (?P<o>{ENTITY})\."),
}
_CONTENTS = re.compile(rf"(?:On the (?P<r1>{ENTITY}), you see|The (?P<r2>{ENTITY}) is open\. In it, you see) (?P<list>[^.]*)\.")
_CLOSED = re.compile(rf"The (?P<r>{ENTITY}) is closed\.")
_FACING = re.compile(rf"^You are facing the (?P<r>{ENTITY})\.")
_ROOM = re.compile(r"Looking quickly around you, you see (?P<list>[^.]*)\.")
_CARRYING = re.compile(r"^You are carrying: (?P<list>.*)\.$")
_EXAMINE_OBJ = re.compile(rf"^This is a (?P<states>(?:hot|cool|cold|clean| and|sliced| )*)(?P<o>{ENTITY})\.")
_EXAMINE_TOGGLE = re.compile(rf"^This (?P<o>{ENTITY}) is (?P<s>on|off)\.")
NOTHING = "Nothing happens."


def entity_type(name: str) -> str:
    """'apple 1' -> 'apple'."""
    return name.rsplit(" ", 1)[0] if name else ""


def entity_list(text: str) -> list[str]:
    """Entity names in an 'a x 1, an y 2, and a z 3' list, in order."""
    return _ENTITY_RE.findall(text)


@dataclass(frozen=True)
class Command:
    verb: str = ""
    object: str = ""
    receptacle: str = ""


def parse_command(command: str, receptacles: set[str] | frozenset[str] = frozenset()) -> Command:
    """The command's verb and arguments, if it has the shape of an ALFWorld command."""
    text = " ".join(command.split())
    for verb, pattern in _COMMANDS:
        m = pattern.match(text)
        if not m:
            continue
        groups = {k: v for k, v in m.groupdict().items() if v}
        obj = groups.get("o") or groups.get("o2") or ""
        recep = groups.get("r", "")
        if "x" in groups:  # examine: object or receptacle, by what the agent has seen
            obj, recep = ("", groups["x"]) if groups["x"] in receptacles else (groups["x"], "")
        return Command(verb, obj, recep)
    return Command()


@dataclass
class StepEvents:
    """What one feedback text says happened (empty strings: it did not happen)."""

    nothing_happens: bool = False
    arrived: str = ""
    opened: str = ""
    closed: str = ""
    picked_up: str = ""
    picked_from: str = ""
    placed: str = ""
    placed_in: str = ""
    cleaned: str = ""
    heated: str = ""
    cooled: str = ""
    toggled_on: str = ""
    toggled_off: str = ""
    examined: str = ""
    seen_objects: list[str] = field(default_factory=list)


@dataclass
class ObservedWorld:
    """The agent's text-derived view of the room, updated step by step."""

    binding: ALFWorldBinding = field(default_factory=ALFWorldBinding)
    location: str = ""
    inventory: list[str] = field(default_factory=list)
    receptacles: set[str] = field(default_factory=set)
    open_receptacles: set[str] = field(default_factory=set)
    visited: set[str] = field(default_factory=set)
    contents: dict[str, set[str]] = field(default_factory=dict)  # receptacle -> objects last seen in it
    seen_objects: set[str] = field(default_factory=set)
    seen_types: set[str] = field(default_factory=set)
    object_states: dict[str, set[str]] = field(default_factory=dict)  # object -> {clean, hot, cool}
    lamps_on: set[str] = field(default_factory=set)
    placed_by_agent: dict[str, str] = field(default_factory=dict)  # object -> receptacle it was put in
    situations: set[str] = field(default_factory=set)  # every situation() this episode has been in
    current_situation: str = ""  # situation() after the last start/step, so a step computes it once

    # -- reading text -------------------------------------------------------------------
    def start(self, intro: str) -> None:
        m = _ROOM.search(intro)
        if m:
            self.receptacles.update(entity_list(m.group("list")))
        self._read_contents(intro, StepEvents())
        self.current_situation = self.situation()
        self.situations.add(self.current_situation)

    def _read_contents(self, feedback: str, ev: StepEvents) -> None:
        for m in _CONTENTS.finditer(feedback):
            recep = m.group("r1") or m.group("r2")
            objs = [] if m.group("list").strip() == "nothing" else entity_list(m.group("list"))
            self.receptacles.add(recep)
            self.contents[recep] = set(objs)
            for obj in objs:
                for other, held in self.contents.items():
                    if other != recep:
                        held.discard(obj)
            ev.seen_objects.extend(objs)
            if m.group("r2"):
                self.open_receptacles.add(recep)
        for m in _CLOSED.finditer(feedback):
            self.receptacles.add(m.group("r"))
            self.open_receptacles.discard(m.group("r"))

    def observe(self, command: Command, feedback: str) -> StepEvents:
        """Update the view from one step's feedback and return what happened."""
        ev = StepEvents()
        text = feedback.strip()
        if text == NOTHING:
            ev.nothing_happens = True
            return ev
        m = _FEEDBACK["arrive"].match(text)
        if m:
            place = m.group("r") or command.receptacle
            if place:
                ev.arrived = place
                self.location = place
                self.receptacles.add(place)
        if m := _FEEDBACK["open"].match(text):
            ev.opened = m.group("r")
            self.open_receptacles.add(ev.opened)
        if m := _FEEDBACK["close"].match(text):
            ev.closed = m.group("r")
            self.open_receptacles.discard(ev.closed)
        if m := _FEEDBACK["take"].match(text):
            ev.picked_up, ev.picked_from = m.group("o"), m.group("r")
            if ev.picked_up not in self.inventory:
                self.inventory.append(ev.picked_up)
            self.contents.get(ev.picked_from, set()).discard(ev.picked_up)
            self.placed_by_agent.pop(ev.picked_up, None)
            self._see(ev.picked_up)
        if m := _FEEDBACK["put"].match(text):
            ev.placed, ev.placed_in = m.group("o"), m.group("r")
            if ev.placed in self.inventory:
                self.inventory.remove(ev.placed)
            self.contents.setdefault(ev.placed_in, set()).add(ev.placed)
            self.placed_by_agent[ev.placed] = ev.placed_in
        for kind, state in (("clean", "clean"), ("heat", "hot"), ("cool", "cool")):
            if m := _FEEDBACK[kind].match(text):
                obj = m.group("o")
                setattr(ev, {"clean": "cleaned", "heat": "heated", "cool": "cooled"}[kind], obj)
                states = self.object_states.setdefault(obj, set())
                if state == "hot":
                    states.discard("cool")
                if state == "cool":
                    states.discard("hot")
                states.add(state)
        if m := _FEEDBACK["toggle_on"].match(text):
            ev.toggled_on = m.group("o")
            self.lamps_on.add(ev.toggled_on)
        if m := _FEEDBACK["toggle_off"].match(text):
            ev.toggled_off = m.group("o")
            self.lamps_on.discard(ev.toggled_off)
        if m := _CARRYING.match(text):
            self.inventory = entity_list(m.group("list"))
        elif text == "You are not carrying anything.":
            self.inventory = []
        if m := _EXAMINE_OBJ.match(text):
            ev.examined = m.group("o")
            words = set(m.group("states").replace(" and", " ").split())
            self.object_states[ev.examined] = {STATE_WORDS[w] for w in words if w in STATE_WORDS}
        elif m := _EXAMINE_TOGGLE.match(text):
            ev.examined = m.group("o")
            (self.lamps_on.add if m.group("s") == "on" else self.lamps_on.discard)(ev.examined)
        elif text.startswith(("There's nothing special about", "This is a normal")):
            ev.examined = command.object or command.receptacle
        elif command.verb == "examine" and (_CONTENTS.match(text) or _CLOSED.match(text)):
            ev.examined = command.receptacle or command.object
        if m := _FACING.match(text):
            self.location = m.group("r")
        self._read_contents(text, ev)
        for obj in ev.seen_objects:
            self._see(obj)
        return ev

    def _see(self, obj: str) -> None:
        self.seen_objects.add(obj)
        self.seen_types.add(entity_type(obj))

    # -- summaries ----------------------------------------------------------------------
    def states_of(self, obj: str) -> list[str]:
        return sorted(self.object_states.get(obj, ()))

    def lamp_on_here(self) -> bool:
        here = self.contents.get(self.location, set())
        return any(lamp in here for lamp in self.lamps_on)

    def signature(self) -> str:
        """Location, inventory, open receptacles and observed object states (readable)."""
        states = ",".join(f"{o}:{'+'.join(sorted(s))}" for o, s in sorted(self.object_states.items()) if s)
        return (f"loc={self.location or 'start'}|inv={','.join(sorted(self.inventory))}"
                f"|open={','.join(sorted(self.open_receptacles))}|states={states}"
                f"|on={','.join(sorted(self.lamps_on))}")

    def situation(self) -> str:
        """Everything the agent knows that its actions can change: the signature plus where it has
        seen each object. Coming back to an earlier situation undid the steps since (a loop);
        seeing a receptacle for the first time is new knowledge, so exploring never repeats one."""
        seen = ";".join(f"{r}:{','.join(sorted(objs))}" for r, objs in sorted(self.contents.items()))
        return f"{self.signature()}|seen={seen}"

    def entities(self) -> list[str]:
        return sorted(self.receptacles | self.seen_objects)

    def _targets_placed(self) -> int:
        b = self.binding
        return sum(1 for obj, recep in self.placed_by_agent.items()
                   if entity_type(obj) == b.target_type and entity_type(recep) == b.destination_type
                   and (not b.transformation or TRANSFORM_STATE.get(b.transformation) in self.object_states.get(obj, ())))

    def stage(self) -> str:
        """How far the observable episode got toward the bound task."""
        b = self.binding
        target = b.target_type
        held = [o for o in self.inventory if entity_type(o) == target]
        if b.task_type == "look":
            if held and self.lamp_on_here():
                return "lit"
            return "holding" if held else ("found" if target in self.seen_types else "searching")
        placed = self._targets_placed()
        if placed:
            return f"placed{placed}" if b.quantity > 1 else "placed"
        want = TRANSFORM_STATE.get(b.transformation, "")
        if held:
            return "transformed" if want and any(want in self.object_states.get(o, ()) for o in held) else "holding"
        return "found" if target in self.seen_types else "searching"

    def context_key(self) -> str:
        """Task predicates + stage + location class + inventory with states (DESIGN §4)."""
        b = self.binding
        task = f"{b.task_type}:{b.target_type}{'/' + b.transformation if b.transformation else ''}" \
               f"{'x' + str(b.quantity) if b.quantity > 1 else ''}>{b.destination_type or b.light_type}"
        inv = ",".join(sorted(entity_type(o) + "".join("+" + s for s in self.states_of(o)) for o in self.inventory))
        return (f"{task}|stage={self.stage()}|loc={entity_type(self.location) or 'start'}|inv={inv}"
                f"|lamp={'on' if self.lamp_on_here() else 'off'}")

    def state_facts(self, num_admissible: int) -> dict[str, Any]:
        """Facts of a step in which nothing happened: the standing state, no events."""
        return {
            "location": self.location,
            "inventory": list(self.inventory),
            "held_states": sorted({s for o in self.inventory for s in self.object_states.get(o, ())}),
            "lamp_on_here": self.lamp_on_here(),
            "stage": self.stage(),
            "num_admissible": num_admissible,
        }

    def step(self, command_text: str, feedback: str, num_admissible: int) -> dict[str, Any]:
        """Read one step (the command sent, the engine's feedback) and return its benchmark
        facts; ``num_admissible`` is the size of the engine's admissible list after it."""
        command = parse_command(command_text, self.receptacles)
        prev_location = self.location
        prev_types = set(self.seen_types)
        visited_before = set(self.visited)
        before = self.current_situation or self.situation()
        ev = self.observe(command, feedback)
        first_visit = bool(ev.arrived) and ev.arrived not in visited_before
        if ev.arrived:
            self.visited.add(ev.arrived)
        new_types = sorted(self.seen_types - prev_types)
        now = self.situation()
        revisited = now != before and now in self.situations
        self.situations.add(now)
        self.current_situation = now
        return self.facts(command, ev, prev_location, first_visit, num_admissible, new_types) | {"revisited": revisited}

    def facts(self, command: Command, ev: StepEvents, prev_location: str, first_visit: bool,
              num_admissible: int, new_types: list[str]) -> dict[str, Any]:
        """The benchmark half of ``ALFWorldFacts`` for one step."""
        placed_count = 0
        if ev.placed:
            placed_count = sum(1 for o in self.contents.get(ev.placed_in, ()) if entity_type(o) == entity_type(ev.placed))
        return {
            "verb": command.verb,
            "object": command.object,
            "object_type": entity_type(command.object),
            "receptacle": command.receptacle,
            "receptacle_type": entity_type(command.receptacle),
            "location": self.location,
            "location_changed": bool(ev.arrived) and self.location != prev_location,
            "first_visit": first_visit,
            "inventory": list(self.inventory),
            "held_states": sorted({s for o in self.inventory for s in self.object_states.get(o, ())}),
            "seen_objects": list(dict.fromkeys(ev.seen_objects)),
            "seen_object_types": list(dict.fromkeys(entity_type(o) for o in ev.seen_objects)),
            "new_object_types": new_types,
            "picked_up": ev.picked_up,
            "picked_up_type": entity_type(ev.picked_up),
            "picked_from_type": entity_type(ev.picked_from),
            "placed": ev.placed,
            "placed_type": entity_type(ev.placed),
            "placed_in_type": entity_type(ev.placed_in),
            "placed_states": self.states_of(ev.placed) if ev.placed else [],
            "placed_type_count": placed_count,
            "opened": ev.opened,
            "closed": ev.closed,
            "cleaned_type": entity_type(ev.cleaned),
            "heated_type": entity_type(ev.heated),
            "cooled_type": entity_type(ev.cooled),
            "toggled_type": entity_type(ev.toggled_on),
            "examined_type": entity_type(ev.examined),
            "lamp_on_here": self.lamp_on_here(),
            "stage": self.stage(),
            "nothing_happens": ev.nothing_happens,
            "num_admissible": num_admissible,
        }
