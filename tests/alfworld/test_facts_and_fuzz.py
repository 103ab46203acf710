"""Fact extraction on real transitions, and a fuzz of arbitrary responses against the engine."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT, collect_games
from rubricgym.adapters.alfworld.observe import ObservedWorld, entity_list, parse_command
from rubricgym.contract import Transition

TRAIN = list(collect_games(BUNDLED_ROOT / "train"))


def _play(env, wrap, task_prefix, extra_before=(), extra_after_first=()):
    task_id = next(t for t in TRAIN if t.startswith(task_prefix))
    env.reset(seed=0, options={"task_id": task_id})
    plan = env.unwrapped.adapter.expert_plan()
    commands = list(extra_before) + plan[:1] + list(extra_after_first) + plan[1:]
    transitions = {}
    for command in commands:
        _, _, terminated, _, info = env.step(wrap(command))
        transitions.setdefault(command, []).append(info["transition"])
        if terminated:
            break
    return plan, transitions


def test_take_go_put_and_first_sighting(make_env, wrap):
    env = make_env()
    plan, tr = _play(env, wrap, "pick_and_place_simple", extra_before=["inventory"])
    go = tr[plan[0]][0].facts
    assert go.verb == "go" and go.location == plan[0][len("go to "):] and go.location_changed and go.first_visit
    assert go.state_changed and go.accepted and go.admissible
    take = next(t.facts for c, ts in tr.items() for t in ts if c.startswith("take "))
    assert take.picked_up and take.picked_up_type == take.object_type and take.inventory == [take.picked_up]
    assert take.picked_from_type == take.receptacle_type and take.stage == "holding"
    put = next(t.facts for c, ts in tr.items() for t in ts if c.startswith("move "))
    assert put.verb == "put" and put.placed == take.picked_up and put.inventory == []
    assert put.placed_in_type == env.unwrapped.adapter.binding().destination_type
    assert put.placed_type_count >= 1 and put.stage == "placed" and put.episode_done
    inv = tr["inventory"][0].facts
    assert inv.verb == "inventory" and inv.accepted and not inv.state_changed and inv.inventory == []
    # every object seen with its receptacle is an entity, and new ones are flagged once
    seen = [o for ts in tr.values() for t in ts for o in t.facts.seen_objects]
    new = [e for ts in tr.values() for t in ts for e in t.facts.new_entities]
    assert set(seen) <= set(new) and len(new) == len(set(new))


@pytest.mark.parametrize("prefix,field,state", [
    ("pick_clean", "cleaned_type", "clean"),
    ("pick_heat", "heated_type", "hot"),
    ("pick_cool", "cooled_type", "cool"),
])
def test_transformations(make_env, wrap, prefix, field, state):
    env = make_env()
    _, tr = _play(env, wrap, prefix)
    verb = {"clean": "clean", "hot": "heat", "cool": "cool"}[state]
    step = next(t.facts for c, ts in tr.items() for t in ts if c.startswith(verb + " "))
    target = env.unwrapped.adapter.binding().target_type
    assert getattr(step, field) == target and step.held_states == [state] and step.stage == "transformed"
    put = next(t.facts for c, ts in tr.items() for t in ts if c.startswith("move "))
    assert put.placed_states == [state] and put.stage == "placed"


def test_open_close_examine_nothing_happens_and_repeats(make_env, wrap):
    env = make_env()
    task_id = next(t for t in TRAIN if t.startswith("pick_cool"))
    env.reset(seed=0, options={"task_id": task_id})
    adapter = env.unwrapped.adapter
    fridge = next(a[len("go to "):] for a in env.unwrapped._state.admissible_actions if a.startswith("go to fridge"))
    steps = [f"go to {fridge}", f"open {fridge}", f"close {fridge}", f"close {fridge}", f"examine {fridge}",
             f"examine {fridge}", "fly to the moon", "Go To " + fridge]
    facts, signatures = [], []
    for command in steps:
        facts.append(env.step(wrap(command))[4]["transition"].facts)
        signatures.append(adapter.render_state())
    assert facts[1].opened == fridge and facts[1].state_changed and f"open={fridge}" in signatures[1]
    assert f"open={fridge}" not in signatures[2]
    assert facts[2].closed == fridge and facts[2].state_changed
    assert facts[3].nothing_happens and facts[3].rejected and not facts[3].admissible and facts[3].error_text == "Nothing happens."
    assert facts[4].examined_type == "fridge" and not facts[4].state_changed and not facts[4].repeated
    assert facts[5].repeated
    assert facts[6].verb == "" and facts[6].nothing_happens and not facts[6].accepted
    assert facts[7].nothing_happens and facts[7].admissible is False  # the engine is case-sensitive


def test_use_lamp(make_env, wrap):
    env = make_env()
    _, tr = _play(env, wrap, "look_at_obj_in_light")
    use = next(t.facts for c, ts in tr.items() for t in ts if c.startswith("use "))
    assert use.toggled_type == env.unwrapped.adapter.binding().light_type
    assert use.lamp_on_here


def test_pick_two_counts_placed_targets(make_env, wrap):
    env = make_env()
    _, tr = _play(env, wrap, "pick_two_obj_and_place")
    puts = [t.facts for c, ts in tr.items() for t in ts if c.startswith("move ")]
    assert [p.placed_type_count for p in puts][-1] >= 2
    assert puts[-1].stage == "placed2"


def test_observer_reads_the_grammar_sentences():
    world = ObservedWorld()
    world.start("You are in the middle of a room. Looking quickly around you, you see a fridge 1, and a sinkbasin 1.")
    assert world.receptacles == {"fridge 1", "sinkbasin 1"}
    ev = world.observe(parse_command("go to fridge 1"), "You arrive at fridge 1. The fridge 1 is closed.")
    assert ev.arrived == "fridge 1" and world.location == "fridge 1" and "fridge 1" not in world.open_receptacles
    ev = world.observe(parse_command("open fridge 1"), "You open the fridge 1. The fridge 1 is open. In it, you see an egg 2, and a apple 1.")
    assert ev.seen_objects == ["egg 2", "apple 1"] and world.contents["fridge 1"] == {"egg 2", "apple 1"}
    world.observe(parse_command("take egg 2 from fridge 1"), "You pick up the egg 2 from the fridge 1.")
    assert world.inventory == ["egg 2"] and world.contents["fridge 1"] == {"apple 1"}
    ev = world.observe(parse_command("examine egg 2"), "This is a hot and clean egg 2.")
    assert ev.examined == "egg 2" and world.object_states["egg 2"] == {"hot", "clean"}
    world.observe(parse_command("inventory"), "You are carrying: a egg 2.")
    assert world.inventory == ["egg 2"]
    assert entity_list("On the desk 1, you see nothing.") == []
    assert parse_command("examine fridge 1", {"fridge 1"}).receptacle == "fridge 1"
    assert parse_command("put apple 1 in/on countertop 2").verb == "put"
    assert parse_command("dance wildly").verb == ""


def test_revisited_flags_loops_and_never_exploration():
    """Back in a situation already left (take and put back, shuttle between places already
    seen): a loop. Seeing a place or an object for the first time changes the situation."""
    world = ObservedWorld()
    world.start("You are in the middle of a room. Looking quickly around you, you see a drawer 1, and a shelf 1.")
    steps = [
        ("go to shelf 1", "You arrive at shelf 1. On the shelf 1, you see a mug 1.", False),
        ("take mug 1 from shelf 1", "You pick up the mug 1 from the shelf 1.", False),
        ("move mug 1 to shelf 1", "You move the mug 1 to the shelf 1.", True),  # undoes the take
        ("take mug 1 from shelf 1", "You pick up the mug 1 from the shelf 1.", True),  # redoes it
        ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.", False),  # first sight
        ("open drawer 1", "You open the drawer 1. The drawer 1 is open. In it, you see nothing.", False),
        ("go to shelf 1", "You arrive at shelf 1. On the shelf 1, you see nothing.", False),  # drawer now open
        ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is open. In it, you see nothing.", True),
        ("go to drawer 1", "Nothing happens.", False),  # no change: repeated/no_state_change's, not a loop
        ("move mug 1 to drawer 1", "You move the mug 1 to the drawer 1.", False),
    ]
    flags = []
    for command, feedback, _ in steps:
        flags.append(world.step(command, feedback, 5)["revisited"])
        assert world.current_situation == world.situation()  # the cached "before" of the next step
    assert flags == [want for _, _, want in steps]


NEAR_MISS = [
    "go to fridge", "go to fridge 99", "take apple from fridge 1", "take apple 1", "move apple 1 to",
    "open", "close the fridge 1", "heat apple 1", "use", "examine", "goto countertop 1", "GO TO COUNTERTOP 1",
    "go  to  countertop 1", "look around", "inventory please", "put apple 1 in fridge 1", "clean with sinkbasin 1",
]
responses = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=80),
    st.sampled_from(NEAR_MISS).map(lambda c: f"<action>{c}</action>"),
    st.builds(lambda a, b: f"<think>{a}</think><action>{b}</action>", st.text(max_size=40), st.text(max_size=60)),
    st.builds(lambda a: f"<action>{a}", st.text(max_size=40)),
    st.builds(lambda a, b: f"<action>{a}</action><action>{b}</action>", st.text(max_size=20), st.text(max_size=20)),
    st.builds(lambda n, c: c * n, st.integers(1000, 40_000), st.sampled_from(["a", "<action>", "é", "\x00", "\ud800"])),
    st.builds(lambda n: "<action>" + "go to fridge 1 " * n + "</action>", st.integers(1, 3000)),
    st.just("<action>look</action>"),
)


@pytest.fixture(scope="module")
def fuzz_env():
    import gymnasium as gym

    env = gym.make("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT, max_steps=500)
    env.reset(seed=0, options={"task_id": TRAIN[0]})
    yield env
    env.close()


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(response=responses)
def test_fuzz_every_response_is_a_classified_transition(fuzz_env, response):
    obs, reward, terminated, truncated, info = fuzz_env.step(response)
    t = info["transition"]
    assert isinstance(t, Transition) and isinstance(obs, str)
    f = t.facts
    assert "environment_failure" not in info, info.get("error")
    if not f.parsed:
        assert f.parse_error and not f.accepted and f.rejected
    elif not f.accepted:
        assert f.rejected and f.nothing_happens and f.error_text == "Nothing happens."
        assert f.admissible is False
    else:
        assert f.admissible is True
    if terminated or truncated:
        fuzz_env.reset(seed=len(response), options={"task_id": TRAIN[0]})


def test_fast_invalid_answers_exactly_like_the_engine(make_env, wrap):
    """Commands outside the admissible set: the shortcut and the engine agree, step by step."""
    junk = NEAR_MISS + ["", "é\u200b", "go to fridge 1 " * 50, "take   apple 1 from countertop 1", "\tlook"]
    runs = []
    for fast in (True, False):
        env = make_env(fast_invalid=fast, max_steps=100)
        env.reset(seed=0, options={"task_id": TRAIN[0]})
        plan = env.unwrapped.adapter.expert_plan()
        out = []
        for i, command in enumerate(junk + plan[:2] + junk[:5]):
            obs, reward, terminated, _, info = env.step(wrap(command))
            t = info["transition"]
            out.append((obs, reward, terminated, t.facts.model_dump(), t.context_key, info["admissible_actions"]))
        runs.append(out)
    assert runs[0] == runs[1]
