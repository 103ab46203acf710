import json

from hypothesis import given, strategies as st

from rubricgym.contract import Facts, Trajectory, Transition, load_jsonl, save_jsonl
from rubricgym.parsing import parse_response

from toy_envs import CounterFacts  # noqa: F401  (registers the Counter facts type)


def _transition(step: int, response: str, value: int) -> Transition:
    return Transition(
        benchmark="Counter",
        step=step,
        response=response,
        action=parse_response(response),
        observation=f"Value {value}.",
        facts=CounterFacts(value=value, new_entities=[f"n{value}"]),
        context_key=f"v={value - 1}",
        env_reward=0.5,
    )


@given(st.lists(st.tuples(st.text(max_size=50), st.integers(-5, 5)), max_size=6))
def test_trajectory_jsonl_roundtrip_is_lossless(tmp_path_factory, steps):
    traj = Trajectory(
        benchmark="Counter",
        task_id="reach-2",
        seed=3,
        instruction="Reach 2.",
        binding={"target": 2},
        transitions=[_transition(i, r, v) for i, (r, v) in enumerate(steps)],
    )
    path = tmp_path_factory.mktemp("j") / "t.jsonl"
    save_jsonl(path, [traj, traj])
    back = load_jsonl(path)
    assert back == [traj, traj]
    for t in back[0].transitions:
        assert type(t.facts) is CounterFacts


def test_unknown_benchmark_loads_base_facts():
    t = Transition.model_validate(
        {"benchmark": "Nope", "step": 0, "response": "", "action": {"ok": False}, "observation": "", "facts": {}}
    )
    assert type(t.facts) is Facts


def test_fact_schema_is_exportable():
    schema = CounterFacts.json_schema()
    json.dumps(schema)
    assert {"value", "parsed", "repeated", "new_entities"} <= set(schema["properties"])


def test_bad_jsonl_line_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"benchmark": "x"}\n')
    try:
        load_jsonl(p)
    except ValueError as exc:
        assert "bad.jsonl:1" in str(exc)
    else:
        raise AssertionError("expected ValueError")
