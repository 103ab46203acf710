"""The choice-policy study end to end on WebShop's bundled engine, at a toy budget (issue 52):
runs, resume, and the report files (the study itself is a benchmark, not a test)."""

from __future__ import annotations

import csv
import json

from rubricgym.trainers.study.choice import ChoiceStudySettings, run_choice_study
from rubricgym.trainers.study.report import write_report


def test_a_stopped_study_resumes_and_reports(tmp_path):
    settings = ChoiceStudySettings(
        name="webshop-toy", env_id="WebShop-Rubric-v0", max_steps=4, held_out_tasks=2,
        warm_start={"games": 2, "steps": 1}, group_size=2, tasks_per_iteration=1, trajectories=4,
        estimators=["grpo", "trca"], lambdas=[0.5], seeds=[0, 1], window=1, output_dir=str(tmp_path), jobs=1)
    records, failed = run_choice_study(settings)
    assert not failed and len(records) == 6  # (grpo, trca, trca at 0.5) x 2 seeds
    first = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()}
    again, _ = run_choice_study(settings)  # resumed: every run is read back, none trained again
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()} == first
    assert [r.model_dump() for r in again] == [r.model_dump() for r in records]
    by = {(r.label, r.seed): r for r in records}
    # paired seeds: the estimators of one seed saw the same tasks and initial states
    assert by["grpo", 0].rows[0]["steps_mean"] > 0 and by["grpo", 0].held_out["episodes"] == 2
    assert "lambda=0.5" in by["trca_lambda0.5", 1].estimator_settings
    # each run file records the objective it trained with, not the estimator's own defaults
    assert "ratio=action, aggregation=rollout_mean_step_mean, skip_zero_advantage=False" \
        in by["grpo", 0].estimator_settings

    summary = write_report(records, settings, failed)
    rows = list(csv.DictReader((tmp_path / "curves.csv").open()))
    assert {"estimator", "seed", "trajectories", "success_rate", "groups_without_success"} <= set(rows[0])
    assert len(rows) == 12  # 6 runs x 2 iterations
    held = list(csv.DictReader((tmp_path / "held_out.csv").open()))
    assert {r["label"] for r in held} == {"grpo", "trca", "trca_lambda0.5"}
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert set(saved["paired_vs_grpo"]) == {"trca", "trca_lambda0.5"}
    assert [row["lambda"] for row in saved["lambda_sweep"]] == [0.5, 0.8]
    assert (tmp_path / "curves.png").is_file() and (tmp_path / "summary.md").read_text().startswith("# webshop-toy")
    assert summary["diagnostics"]["failed_share"]["paper"] == 0.965
