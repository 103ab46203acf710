"""`rubricgym library test` / `diff` / `record` on stored ALFWorld trajectories from the real
engine: expert episodes (gym.make + the benchmark's expert player, one task of each type) and
fuzzed episodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from requirements_guard import need
from rubricgym.registration import operator_library

from rubricgym.contract import load_jsonl, save_jsonl

pytestmark = pytest.mark.slow
ENV = "ALFWorld-Rubric-v0"
ROOT = Path(__file__).resolve().parents[2]
TASK_TYPES = ("pick_and_place", "pick_clean", "pick_heat", "pick_cool", "look_at_obj", "pick_two")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rubricgym.cli", "library", *args], check=False, capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.fixture(scope="module")
def expert_file(tmp_path_factory) -> Path:
    """One expert episode per task type, played through gym.make with the spec's expert."""
    need("alfworld", "textworld")
    import gymnasium as gym

    import rubricgym  # noqa: F401
    from rubricgym.registration import get_spec

    expert = get_spec(ENV).load_expert()
    env = gym.make(ENV, reward="none")
    trajectories = []
    try:
        tasks = env.unwrapped.adapter.task_ids()
        for kind in TASK_TYPES:
            task = next(t for t in tasks if t.startswith(kind))
            env.reset(seed=0, options={"task_id": task})
            for action in expert(env.unwrapped.adapter):
                *_, term, trunc, _ = env.step(env.unwrapped.adapter.grammar.render(action))
                if term or trunc:
                    break
            trajectories.append(env.unwrapped.trajectory.model_copy(deep=True))
    finally:
        env.close()
    assert all(t.outcome.success for t in trajectories)  # they are expert episodes
    path = tmp_path_factory.mktemp("trajectories") / "expert.jsonl"
    save_jsonl(path, trajectories)
    return path


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory) -> Path:
    need("alfworld", "textworld")
    path = tmp_path_factory.mktemp("trajectories") / "fuzz.jsonl"
    result = cli("record", "--env", ENV, "--policy", "fuzz", "--episodes", "4", "--max-steps", "20", "--out", str(path))
    assert result.returncode == 0, result.stderr
    assert "wrote 4 fuzz episode(s)" in result.stdout
    return path


@pytest.fixture(scope="module")
def shipped() -> dict:
    return yaml.safe_load(operator_library("ALFWorld").read_text())


def report(*args: str) -> dict:
    result = cli("test", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def fired(rep: dict) -> dict[str, int]:
    return {o["id"]: o["fired_steps"] for o in rep["operators"]}


def test_expert_fires_every_evidence_and_execution_operator_and_no_invalidity(expert_file, shipped):
    rep = report("alfworld", "--trajectories", str(expert_file))
    assert rep["episodes"] == len(TASK_TYPES) and rep["steps"] == sum(t.num_steps for t in load_jsonl(expert_file))
    counts = fired(rep)
    categories = {o["id"]: o["category"] for o in shipped["operators"]}
    assert set(counts) == set(categories)
    never = {i for i, n in counts.items() if n == 0 and categories[i] != "invalidity"}
    assert not never, f"Evidence/Execution operators the expert never fires: {never}"
    invalid = {i: n for i, n in counts.items() if n and categories[i] == "invalidity"}
    assert not invalid, f"Invalidity operators fired on expert episodes: {invalid}"
    # where: steps listed are real steps of the episodes, and counted steps match the listing
    for o in rep["operators"]:
        assert len(o["first_fired"]) == min(o["fired_steps"], 20)
        assert all(0 <= s["episode"] < rep["episodes"] for s in o["first_fired"])
    by_cat = {c["category"]: c for c in rep["categories"]}
    assert by_cat["invalidity"]["steps_with_any"] == 0 and by_cat["execution"]["episode_mean"] > 0
    groups = rep["step_groups"]  # one rollout per task here: only a state one rollout revisits is shared
    assert groups["steps"] == rep["steps"] and groups["task_groups"] == rep["episodes"]
    assert groups["steps_in_shared_groups"] < rep["steps"] and all(g["rollouts"] == 1 for g in groups["largest"])
    assert rep["episode_return_mean"] > 0


def test_fuzz_fires_every_invalidity_operator(fuzz_file, shipped):
    counts = fired(report("alfworld", "--trajectories", str(fuzz_file)))
    missing = [o["id"] for o in shipped["operators"] if o["category"] == "invalidity" and not counts[o["id"]]]
    assert not missing, f"Invalidity operators fuzz never fires: {missing}"


@pytest.fixture(scope="module")
def weak_library(tmp_path_factory, shipped) -> Path:
    """The shipped library plus an operator that fires on every expert step (every response
    parses) and one that never fires (a task-specific rule), and one condition rewritten without changing its verdicts."""
    data = json.loads(json.dumps(shipped))
    data["name"] = "alfworld-weak"
    data["operators"].insert(0, {
        "id": "any_parsed_step", "category": "evidence", "description": "the response parsed",
        "reads": ["parsed"], "condition": "facts.parsed",
        "examples": [{"expected": True, "facts": {"parsed": True}}, {"expected": False, "facts": {"parsed": False}}]})
    data["operators"].insert(1, {
        "id": "picked_unicorn", "category": "execution", "description": "picked up a unicorn",
        "reads": ["picked_up_type"], "condition": 'facts.picked_up_type == "unicorn"',
        "examples": [{"expected": True, "facts": {"picked_up_type": "unicorn"}},
                     {"expected": False, "facts": {"picked_up_type": "apple"}}]})
    edited = next(o for o in data["operators"] if o["id"] == "opened_revealing")
    edited["condition"] = f"facts.accepted && ({edited['condition']})"  # same verdicts, new text
    path = tmp_path_factory.mktemp("libraries") / "weak.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert cli("validate", str(path), "--env", ENV).returncode == 0
    return path


def test_weak_library_flags_never_and_always_firing_operators(expert_file, weak_library):
    rep = report(str(weak_library), "--trajectories", str(expert_file))
    assert "any_parsed_step" in rep["always_fire"] and "picked_unicorn" in rep["never_fire"]
    assert fired(rep)["any_parsed_step"] == rep["steps"]
    # the human report says the same, and --strict turns the flags into a failing exit code
    text = cli("test", str(weak_library), "--trajectories", str(expert_file))
    assert text.returncode == 0
    assert "fire on every step (no signal" in text.stdout and "any_parsed_step" in text.stdout.split("fire on every step")[1]
    assert "picked_unicorn" in text.stdout.split("never fire (no signal")[1]
    assert cli("test", str(weak_library), "--trajectories", str(expert_file), "--strict").returncode == 1


def test_shipped_library_is_not_flagged_on_expert_plus_fuzz(expert_file, fuzz_file):
    rep = report("alfworld", "--trajectories", str(expert_file), "--trajectories", str(fuzz_file))
    assert rep["never_fire"] == [] and rep["always_fire"] == []


def test_diff_shows_where_an_edit_changes_the_judgments(expert_file, weak_library):
    result = cli("diff", "alfworld", str(weak_library), "--trajectories", str(expert_file), "--json")
    assert result.returncode == 0, result.stderr
    diff = json.loads(result.stdout)
    steps = sum(t.num_steps for t in load_jsonl(expert_file))
    assert diff["only_in_b"] == ["any_parsed_step", "picked_unicorn"] and diff["only_in_a"] == []
    assert diff["condition_changed"] == ["opened_revealing"]
    assert diff["per_operator"] == {"any_parsed_step": steps}  # picked_unicorn never fires, the rewrite is equivalent
    assert diff["disagreeing_steps"] == steps  # the new operator fires on every step
    for d in diff["steps_detail"]:
        ids = {c["id"] for c in d["changes"]}
        assert "any_parsed_step" in ids
        assert all((c["a"], c["b"]) == (None, 1) for c in d["changes"] if c["id"] == "any_parsed_step")
    text = cli("diff", "alfworld", str(weak_library), "--trajectories", str(expert_file), "--limit", "3")
    assert "only in B: any_parsed_step, picked_unicorn" in text.stdout and "any_parsed_step -->1" in text.stdout
    assert f"... {steps - 3} more" in text.stdout


def test_diff_of_a_library_with_itself_agrees(expert_file):
    result = cli("diff", "alfworld", str(operator_library("ALFWorld")), "--trajectories", str(expert_file))
    assert result.returncode == 0 and "the libraries agree on every step" in result.stdout


def test_bad_inputs_are_clear_errors(tmp_path, expert_file):
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    bad = cli("test", "alfworld", "--trajectories", str(tmp_path / "junk.jsonl"))
    assert bad.returncode == 2 and "cannot read trajectories" in bad.stderr and "Traceback" not in bad.stderr
    missing = cli("test", "no_such_library", "--trajectories", str(expert_file))
    assert missing.returncode == 2 and "neither a file nor a shipped library" in missing.stderr
