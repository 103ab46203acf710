"""Generate ALFRED-format ALFWorld games offline (``traj_data.json`` + ``game.tw-pddl``).

The official game files cannot be downloaded here, so this writes new problems against
alfworld's packaged ``alfred.pddl`` / ``alfred.twl2`` in the official folder layout
(``<out>/json_2.1.1/<split>/<task_type>-<Obj>-None-<Parent|Toggle>-<scene>/trial_T.../``).
Goals come from alfworld's goal library, instructions from its own ``add_task_to_grammar``.
Each game is checked on the real engine: the fast-downward planner's ``policy_commands``
must win it, and the planner's plan is stored as ``walkthrough``.

    python -m rubricgym.adapters.alfworld.generate --out DIR --seed S --n N
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT, TASK_TYPES, seeded_global_random, start_engine
from rubricgym.adapters.alfworld.rooms import (
    EXTRA_CAN_CONTAIN,
    LAMP_HOSTS,
    LAMPS,
    ROOMS,
    TRANSFORM_APPLIANCE,
    TRANSFORM_SET,
)

TRANSFORM_OF = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
}
# ALFRED scene numbers by room type (kitchens 1-30, living rooms 201-230, ...)
SCENE_BASE = {"Kitchen": 0, "LivingRoom": 200, "Bedroom": 300, "Bathroom": 400}
# classes the domain's actions name as constants: every problem declares them
DOMAIN_RTYPES = ("SinkBasin", "Microwave", "Fridge")
DOMAIN_OTYPES = ("Knife", "ButterKnife")
NOT_PICKUPABLE = set(LAMPS)
# bundled split name -> the official split it stands for
BUNDLE_SPLITS = {"train": "train", "eval": "valid_seen"}


class GenerationError(RuntimeError):
    """A sampled room could not host the task (resampled), or a game failed verification."""


@dataclass
class Receptacle:
    id: str
    cls: str
    loc: str


@dataclass
class Item:
    id: str
    cls: str
    recep: int  # index into GameSpec.receptacles


@dataclass
class GameSpec:
    task_type: str
    room: str
    scene: int
    params: dict[str, object]
    receptacles: list[Receptacle] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    agent_loc: str = ""


# -- ALFRED naming ------------------------------------------------------------------------
def mangle(raw: str) -> str:
    """ALFRED's PDDL id substitutions (PlannedGameState.fix_pddl_str_chars)."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        raw = raw.replace(a, b)
    return raw


def _coord(rng: random.Random) -> str:
    return f"{rng.uniform(-3.0, 3.0):+06.2f}"


def _new_id(cls: str, rng: random.Random, used: set[str]) -> str:
    while True:
        if cls.endswith("Basin"):  # ALFRED: Sink|x|y|z|SinkBasin
            raw = f"{cls[:-5]}|{_coord(rng)}|{_coord(rng)}|{_coord(rng)}|{cls}"
        else:
            raw = f"{cls}|{_coord(rng)}|{_coord(rng)}|{_coord(rng)}"
        ident = mangle(raw)
        if ident not in used:
            used.add(ident)
            return ident


def _new_loc(rng: random.Random, used: set[str]) -> str:
    while True:
        raw = f"loc|{rng.randint(-9, 9)}|{rng.randint(-9, 9)}|{rng.randint(0, 3)}|{rng.choice([0, 15, 30, 45, 60])}"
        ident = mangle(raw)
        if ident not in used:
            used.add(ident)
            return ident


# -- sampling -----------------------------------------------------------------------------
def _containers() -> dict[str, set[str]]:
    import alfworld.gen.constants as C  # loaded on use: alfworld sets process-wide state on import

    holds = {r: set(objs) for r, objs in C.VAL_RECEPTACLE_OBJECTS.items()}
    for obj, receps in EXTRA_CAN_CONTAIN.items():
        for r in receps:
            holds.setdefault(r, set()).add(obj)
    return holds


def _action_set(name: str) -> set[str]:
    import alfworld.gen.constants as C  # loaded on use: alfworld sets process-wide state on import

    return set(C.VAL_ACTION_OBJECTS[name])


def sample_game(task_type: str, rng: random.Random) -> GameSpec:
    """One room and task of ``task_type``; raises GenerationError when the draw cannot work."""
    import alfworld.gen.constants as C  # loaded on use: alfworld sets process-wide state on import

    holds = _containers()
    room = rng.choice(sorted(C.GOALS_VALID[task_type]))
    template = ROOMS[room]
    caps: dict[str, int] = dict(template["receptacles"])  # type: ignore[arg-type]
    pool: list[str] = list(template["objects"])  # type: ignore[arg-type]
    transform = TRANSFORM_OF.get(task_type, "")

    required: list[str] = []
    if transform:
        required.append(TRANSFORM_APPLIANCE[transform])
    if task_type == "look_at_obj_in_light":
        hosts = [h for h in LAMP_HOSTS if h in caps]
        if not hosts:
            raise GenerationError(f"{room} has no lamp host")
        required.append(rng.choice(hosts))
    n_receps = rng.randint(4, 7)
    optional = [c for c, k in caps.items() for _ in range(k)]
    rng.shuffle(optional)
    recep_classes = list(required)
    for cls in optional:
        if len(recep_classes) >= n_receps:
            break
        if recep_classes.count(cls) < caps[cls]:
            recep_classes.append(cls)
    present = set(recep_classes)

    # target: pickupable, transformable if needed, with somewhere to go and somewhere to start
    candidates = []
    for obj in pool:
        if obj in NOT_PICKUPABLE or (transform and obj not in _action_set(TRANSFORM_SET[transform])):
            continue
        sources = {r for r in present if obj in holds.get(r, ())}
        if task_type == "look_at_obj_in_light":
            if sources:
                candidates.append((obj, ""))
            continue
        for dest in sorted(present):
            if obj not in holds.get(dest, ()) or (transform and dest == TRANSFORM_APPLIANCE[transform]):
                continue
            if sources - {dest}:
                candidates.append((obj, dest))
    if not candidates:
        raise GenerationError(f"no target fits {task_type} in this {room}")
    target, dest = rng.choice(sorted(candidates))
    lamp = rng.choice(LAMPS) if task_type == "look_at_obj_in_light" else ""

    spec = GameSpec(
        task_type=task_type,
        room=room,
        scene=SCENE_BASE[room] + rng.randint(1, 30),
        params={
            "object_sliced": False,
            "object_target": target,
            "parent_target": dest,
            "toggle_target": lamp,
            "mrecep_target": "",
        },
    )
    used: set[str] = set()
    for cls in recep_classes:
        spec.receptacles.append(Receptacle(_new_id(cls, rng, used), cls, _new_loc(rng, used)))
    spec.agent_loc = _new_loc(rng, used)

    def place(cls: str, avoid: str = "") -> None:
        spots = [i for i, r in enumerate(spec.receptacles) if cls in holds.get(r.cls, ()) and r.cls != avoid]
        if spots:
            spec.items.append(Item(_new_id(cls, rng, used), cls, rng.choice(spots)))

    n_targets = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for _ in range(n_targets):
        place(target, avoid=dest)
    if lamp:
        hosts = [i for i, r in enumerate(spec.receptacles) if r.cls in LAMP_HOSTS]
        spec.items.append(Item(_new_id(lamp, rng, used), lamp, rng.choice(hosts)))
    distractors = [o for o in pool if o != target]
    for cls in rng.sample(distractors, k=min(len(distractors), rng.randint(3, 7))):
        place(cls)
    return spec


# -- PDDL ---------------------------------------------------------------------------------
def goal_pddl(task_type: str, params: dict[str, object]) -> str:
    """Exactly what alfworld's goal library gives (then '#' -> '-'); it closes ``(define``."""
    import alfworld.gen.goal_library as glib  # loaded on use: alfworld sets process-wide state on import

    text = glib.gdict[task_type]["pddl"].format(
        obj=params["object_target"],
        recep=params["parent_target"],
        toggle=params["toggle_target"],
        mrecep=params["mrecep_target"],
    )
    return text.replace("#", "-")


def problem_pddl(spec: GameSpec, name: str) -> str:
    import alfworld.gen.constants as C  # loaded on use: alfworld sets process-wide state on import

    holds = _containers()
    otypes = sorted({i.cls for i in spec.items} | set(DOMAIN_OTYPES))
    rtypes = sorted({r.cls for r in spec.receptacles} | set(DOMAIN_RTYPES))
    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in otypes]
    decl += [f"{t}Type - rtype" for t in rtypes]
    decl += [f"{i.id} - object" for i in spec.items]
    decl += [f"{r.id} - receptacle" for r in spec.receptacles]
    decl += [f"{r.loc} - location" for r in spec.receptacles] + [f"{spec.agent_loc} - location"]

    init = [f"(receptacleType {r.id} {r.cls}Type)" for r in spec.receptacles]
    init += [f"(objectType {i.id} {i.cls}Type)" for i in spec.items]
    for rc in sorted({r.cls for r in spec.receptacles}):
        for oc in sorted({i.cls for i in spec.items}):
            if oc in holds.get(rc, ()):
                init.append(f"(canContain {rc}Type {oc}Type)")
    init += [f"(pickupable {i.id})" for i in spec.items if i.cls not in NOT_PICKUPABLE]
    init += [f"(isReceptacleObject {i.id})" for i in spec.items if i.cls in C.MOVABLE_RECEPTACLES]
    init += [f"(openable {r.id})" for r in spec.receptacles if r.cls in C.OPENABLE_CLASS_SET]
    init.append(f"(atLocation agent1 {spec.agent_loc})")
    for key, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"), ("Coolable", "coolable"),
                      ("Toggleable", "toggleable"), ("Sliceable", "sliceable")):
        members = _action_set(key)
        init += [f"({pred} {i.id})" for i in spec.items if i.cls in members]
    init += [f"(inReceptacle {i.id} {spec.receptacles[i.recep].id})" for i in spec.items]
    init += [f"(receptacleAtLocation {r.id} {r.loc})" for r in spec.receptacles]
    init += [f"(objectAtLocation {i.id} {spec.receptacles[i.recep].loc})" for i in spec.items]
    nl = "\n        "
    return (
        f"\n(define (problem {name})\n(:domain alfred)\n(:objects\n        {nl.join(decl)}\n        )\n"
        f"(:init\n        {nl.join(init)}\n        )\n{goal_pddl(spec.task_type, spec.params)}\n"
    )


# -- files --------------------------------------------------------------------------------
def task_description(task_type: str, params: dict[str, object], rng: random.Random) -> str:
    import alfworld.gen.goal_library as glib  # loaded on use: alfworld sets process-wide state on import

    template = rng.choice(glib.gdict[task_type]["templates"])
    return template.format(**{k: str(params[f"{v}_target"]).lower() for k, v in
                              (("obj", "object"), ("recep", "parent"), ("toggle", "toggle"), ("mrecep", "mrecep"))})


def write_game(split_dir: Path, spec: GameSpec, trial: str, phrase_seed: str) -> Path:
    """Write ``traj_data.json`` and ``game.tw-pddl``; returns the game file."""
    from alfworld.agents.utils.misc import add_task_to_grammar  # loaded on use: alfworld sets process-wide state on import
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    p = spec.params
    folder = "{}-{}-{}-{}-{}".format(
        spec.task_type, p["object_target"], p["mrecep_target"] or "None",
        p["parent_target"] or p["toggle_target"], spec.scene,
    )
    game_dir = split_dir / folder / trial
    game_dir.mkdir(parents=True, exist_ok=True)
    traj = {
        "task_type": spec.task_type,
        "task_id": trial,
        "pddl_params": p,
        "scene": {"scene_num": spec.scene, "room_type": spec.room, "generated_by": "rubricgym"},
        # one templated "annotation" keeps alfworld's goal_desc_human_anns_prob usable
        "turk_annotations": {"anns": [{
            "task_desc": task_description(spec.task_type, p, random.Random(phrase_seed + ":ann")),
            "high_descs": [], "assignment_id": "rubricgym-generated", "votes": [],
        }]},
    }
    (game_dir / "traj_data.json").write_text(json.dumps(traj, indent=1, sort_keys=True) + "\n")
    with seeded_global_random(phrase_seed):
        grammar = add_task_to_grammar(Path(ALFRED_TWL2_PATH).read_text(), traj)
    game = {
        "pddl_domain": Path(ALFRED_PDDL_PATH).read_text(),
        "grammar": grammar,
        "pddl_problem": problem_pddl(spec, "plan_" + trial),
        "solvable": False,  # set by verify_game
        "walkthrough": None,
    }
    game_file = game_dir / "game.tw-pddl"
    game_file.write_text(json.dumps(game))
    return game_file


def verify_game(game_file: Path) -> list[str]:
    """Play the planner's plan on the real engine; mark the game solvable. Raises if not won."""
    env = start_engine(game_file, shuffle=False, policy=True)
    try:
        state = env.reset()
        if state.won:
            raise GenerationError(f"{game_file}: won at start")
        if "Your task is to:" not in state.feedback:
            raise GenerationError(f"{game_file}: intro does not state the task")
        plan = list(state.policy_commands or [])
        if not plan:
            raise GenerationError(f"{game_file}: planner found no plan")
        for command in plan:
            if command not in state.admissible_commands:
                raise GenerationError(f"{game_file}: plan step {command!r} not admissible")
            state, _, _ = env.step(command)
        if not state.won:
            raise GenerationError(f"{game_file}: planner's plan does not win")
    finally:
        env.close()
    game = json.loads(game_file.read_text())
    game["solvable"] = True
    game["walkthrough"] = plan
    game_file.write_text(json.dumps(game))
    return plan


def generate_split(split_dir: Path, seed: int, n: int, label: str, verify: bool = True,
                   max_attempts: int = 50, task_types: tuple[str, ...] = TASK_TYPES) -> list[Path]:
    """``n`` games cycling over ``task_types`` (default: all six); deterministic for (seed,
    label, n, task_types)."""
    unknown = sorted(set(task_types) - set(TASK_TYPES))
    if unknown or not task_types:
        raise ValueError(f"unknown ALFWorld task types {unknown}; choose from {list(TASK_TYPES)}")
    files = []
    for index in range(n):
        task_type = task_types[index % len(task_types)]
        for attempt in range(max_attempts):
            key = f"{seed}:{label}:{index}:{attempt}"
            try:
                spec = sample_game(task_type, random.Random(key))
            except GenerationError:
                continue
            trial = f"trial_T{seed:04d}{index:04d}_{label}_{attempt:02d}"
            game_file = write_game(split_dir, spec, trial, phrase_seed=key)
            if not verify:
                break
            try:
                verify_game(game_file)
                break
            except GenerationError as exc:
                print(f"resampling: {exc}", file=sys.stderr)
                shutil.rmtree(game_file.parent)
                if not any(game_file.parent.parent.iterdir()):
                    game_file.parent.parent.rmdir()
        else:
            raise GenerationError(f"no {task_type} game after {max_attempts} attempts")
        files.append(game_file)
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="data root; games go to OUT/json_2.1.1/<split>/")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=12, help="games per split (task types cycle)")
    ap.add_argument("--splits", nargs="+", default=["train", "valid_seen"])
    ap.add_argument("--task-types", nargs="+", default=list(TASK_TYPES), metavar="TYPE",
                    help=f"task families to cycle over (default: all six: {', '.join(TASK_TYPES)})")
    ap.add_argument("--no-verify", action="store_true", help="skip the planner check (games stay unsolvable-marked)")
    ap.add_argument("--bundle", action="store_true",
                    help="rewrite the bundled set (adapters/alfworld/games/{train,eval}); --n is per split")
    args = ap.parse_args(argv)
    if args.bundle:
        targets = {split: BUNDLED_ROOT / split for split in BUNDLE_SPLITS}
        counts = {"train": args.n, "eval": max(6, args.n // 2)}
    else:
        if args.out is None:
            ap.error("--out is required (or --bundle)")
        targets = {split: args.out / "json_2.1.1" / split for split in args.splits}
        counts = dict.fromkeys(args.splits, args.n)
    for split, split_dir in targets.items():
        if split_dir.exists():
            shutil.rmtree(split_dir)
        files = generate_split(split_dir, args.seed, counts[split], label=split, verify=not args.no_verify,
                               task_types=tuple(args.task_types))
        print(f"{split}: {len(files)} games in {split_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
