"""rubricgym.report without a browser: record layouts, sampling, plots, escaping, bad files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_helpers import HTML, SCRIPT

from rubricgym.cli import main as cli_main
from rubricgym.contract import Facts, Outcome, ParsedAction, Trajectory, Transition, save_jsonl
from rubricgym.report import build_report, render, write_report
from rubricgym.report.plots import curve_svg
from rubricgym.records import step_records
from rubricgym.report.categories import operator_categories
from rubricgym.report.sources import sample_evenly

SVG = "{http://www.w3.org/2000/svg}"


def test_new_record_layout_is_read_first_and_the_old_one_still_works():
    new = {"reward": 0.2, "r_F": 0.1, "r_B": 0.3, "judgments": {"a": 1}, "library": "lib"}
    old = {"r_TRCA": 0.5, "r_F": 0.5, "r_B": 0.5, "judgments": {"a": 0}, "library": "lib"}
    assert step_records({"rubric": {"trca": new}, "trca": old}).trca().r_F == 0.1
    assert step_records({"trca": old}).trca().r_TRCA == step_records({"trca": old}).trca().reward == 0.5
    assert step_records({"rubric": {"my_trca": new}}).trca().name == "my_trca"  # any component with judgments
    assert step_records({"rubric": {"my_trca": new}}).trca().r_TRCA == 0.2
    assert step_records({"rubric": {"judge": {"verdicts": []}}}).trca() is None
    verdicts = {"reward": 1.0, "verdicts": [], "criteria": {}}
    assert step_records({"rubric": {"judge": verdicts}}).judge().reward == 1.0
    assert step_records({"judge": verdicts}).judge().reward == 1.0
    assert step_records({"rubric": "not a mapping", "trca": old}).trca().r_F == 0.5
    assert step_records({}).components == {}


def test_operator_categories_come_from_the_library_file():
    cats = operator_categories("alfworld-default", "ALFWorld")
    assert cats["parse_failure"] == "invalidity" and cats["picked_target"] == "execution"
    assert cats["target_first_seen"] == "evidence"
    assert operator_categories("no-such-library", "ALFWorld") == {}


@given(st.integers(0, 60), st.integers(0, 12))
def test_sampling_keeps_first_and_last_and_never_exceeds_the_budget(n, count):
    items = list(range(n))
    picked = sample_evenly(items, count)
    assert len(picked) == min(n, count)
    assert picked == sorted(set(picked))
    if n and count >= 2:
        assert picked[0] == 0 and picked[-1] == n - 1


@settings(max_examples=6)
@given(st.integers(1, 600))
def test_a_curve_draws_one_marker_per_point(n):
    svg = curve_svg("loss", {"loss": [(float(i), float(i % 7)) for i in range(1, n + 1)]})
    root = ET.fromstring(svg)
    group = next(g for g in root.iter(f"{SVG}g") if g.get("id") == "curve-loss")
    assert len(list(group.iter(f"{SVG}use"))) == n


def _trajectory(text: str) -> Trajectory:
    info = {"rubric": {"trca": {"reward": -0.05, "r_F": -0.05, "r_B": 0.0, "judgments": {"parse_failure": 1},
                                "library": "alfworld-default"}},
            "judge": {"reward": 0.0, "criteria": {"c1": text}, "verdicts": [
                {"criterion_id": "c1", "verdict": "fail", "steps": [0], "reason": text}]}}
    step = Transition(step=0, response=text, action=ParsedAction(ok=False, error="missing_tag", detail=text),
                      observation=text, facts=Facts(parsed=False, error_text=text, new_entities=[text]),
                      context_key="k", info=info)
    return Trajectory(benchmark="base", task_id=text, instruction=text, initial_observation=text,
                      transitions=[step], outcome=Outcome(success=False), meta={"step_advantages": [0.25]})


def test_every_piece_of_trajectory_text_is_escaped(tmp_path):
    text = f"{SCRIPT}{HTML}</td></tr></table>"
    path = tmp_path / "t.jsonl"
    save_jsonl(path, [_trajectory(text)])
    html = render(build_report(path))
    assert "<script" not in html.lower() and "<img" not in html.lower() and "</table></td>" not in html
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_damaged_run_files_are_reported_not_fatal(tmp_path):
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    (run / "config.yaml").write_text("run:\n  iterations: 3\nalgorithm:\n  advantage: trca\n  gamma: null\n"
                                     "  trca_lambda: null\n", encoding="utf-8")
    lines = [json.dumps({"iteration": 1, "success_rate": 0.5, "loss": 1.0}),
             json.dumps({"iteration": 2, "success_rate": float("nan")}),
             '{"iteration": 3, "succ']  # a run killed mid-write
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    good = _trajectory("fine").model_copy(update={"meta": {"iteration": 1, "group": 0, "member": 0,
                                                           "step_advantages": [0.25]}})
    (run / "trajectories" / "iter-000001.jsonl").write_text(good.to_json_line() + "\nnot json\n", encoding="utf-8")
    report = build_report(run)
    assert report.iterations_done == 2 and report.iterations_total == 3
    assert any("metrics.jsonl:3" in p for p in report.problems)
    assert any("iter-000001.jsonl:2" in p for p in report.problems)
    success = next(c for c in report.curves if c.slug == "success-rate")
    assert success.points == 1  # the NaN value is not a point
    assert [g.rollouts[0].steps[0].advantage for s in report.sections for g in s.groups] == [0.25]
    out = write_report(run, live=True)
    assert out == run / "report.html" and 'http-equiv="refresh"' in out.read_text(encoding="utf-8")


def test_cli_writes_a_report_and_refuses_a_missing_path(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    save_jsonl(path, [_trajectory("hello")])
    assert cli_main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    assert cli_main(["report", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_folder_that_is_no_run_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a run folder"):
        build_report(tmp_path)


@settings(max_examples=12)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'/ab =script")), min_size=1, max_size=60))
def test_any_text_is_rendered_escaped(text):
    import tempfile
    from pathlib import Path

    from markupsafe import escape

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        save_jsonl(path, [_trajectory(text)])
        html = render(build_report(path))
    assert str(escape(text)) in html and "<script" not in html


def test_judge_verdicts_are_shown_with_the_steps_they_cite(tmp_path):
    path = tmp_path / "t.jsonl"
    save_jsonl(path, [_trajectory("the agent checked the fridge")])
    report = build_report(path)
    rollout = report.sections[0].groups[0].rollouts[0]
    assert [(c.id, c.verdict, c.steps) for c in rollout.criteria] == [("c1", "fail", [0])]
    assert rollout.judge_reward == 0.0
    assert [(c.criterion, c.verdict) for c in rollout.steps[0].citations] == [("c1", "fail")]
    assert rollout.steps[0].fired == {"invalidity": ["parse_failure"]}
    assert rollout.steps[0].advantage == 0.25 and report.sections[0].groups[0].advantage_source == "stored"


def test_a_trainer_s_stored_draco_record_is_shown_when_no_transition_carries_one(tmp_path):
    """The trainer keeps a DRACO judge's verdicts in ``meta["judge"]`` (its rewards are not a
    wrapper's): the report shows them like a wrapper's record."""
    trajectory = _trajectory("picked the wrong mug")
    del trajectory.transitions[0].info["judge"]
    trajectory.meta["judge"] = {"reward": 1.0, "advantage": 0.7, "criteria": {"c2": "puts the mug away"},
                                "verdicts": [{"criterion_id": "c2", "verdict": "pass", "steps": [0], "reason": "ok"}]}
    path = tmp_path / "t.jsonl"
    save_jsonl(path, [trajectory])
    rollout = build_report(path).sections[0].groups[0].rollouts[0]
    assert [(c.id, c.text, c.verdict, c.steps) for c in rollout.criteria] == [("c2", "puts the mug away", "pass", [0])]
    assert rollout.judge_reward == 1.0
    assert [(c.criterion, c.verdict) for c in rollout.steps[0].citations] == [("c2", "pass")]


def test_control_characters_are_shown_as_pictures(tmp_path):
    path = tmp_path / "t.jsonl"
    save_jsonl(path, [_trajectory("a\x00b\x1bc\x7f")])
    html = render(build_report(path))
    assert "a\u2400b\u241bc\u2421" in html
    assert not any(ord(c) < 32 and c not in "\n\t" for c in html)
