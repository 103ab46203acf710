"""``rubricgym study`` on the word task with the tiny model: matched budgets, curves, a table."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from rubricgym.cli import main


ROOT = Path(__file__).resolve().parents[2]
OBJECTIVE = ["algorithm.ratio_level=token", "algorithm.loss_aggregation=token_mean",
             "algorithm.skip_zero_advantage=false"]
TINY_WORD_TASK = ["model.name=tiny", "env.factory=trca-word", "env.max_steps=2",
                  "algorithm.group_size=2", "algorithm.tasks_per_iteration=1", "generation.max_new_tokens=8",
                  "warmup.enabled=false", "run.checkpoint_every=100", "run.tensorboard=false", *OBJECTIVE]


def _study(out, *extra, sets=TINY_WORD_TASK):
    return main(["study", "--estimators", "grpo,trca", "--seeds", "0,1", "--trajectories", "4", "--target", "0.5",
                 "--output-dir", str(out), *extra, *[a for s in sets for a in ("--set", s)]])


@pytest.mark.slow
def test_study_runs_estimators_at_matched_budgets_and_draws_curves(tmp_path, capsys):
    out = tmp_path / "study"
    rc = _study(out, "--held-out", sets=[*TINY_WORD_TASK, "run.threads=1"])
    assert rc in (0, 1)  # 1: no estimator reached the target (a tiny random model rarely does)
    rows = list(csv.DictReader(open(out / "study.csv")))
    assert len(rows) == 2 * 2 * 2  # estimators x seeds x iterations (4 trajectories / 2 per iteration)
    assert {(r["estimator"], r["seed"]) for r in rows} == {(e, s) for e in ("grpo", "trca") for s in ("0", "1")}
    assert sorted({int(r["trajectories"]) for r in rows}) == [2, 4]
    assert all(0.0 <= float(r["success_rate"]) <= 1.0 for r in rows)
    assert all(r["trca_reward_mean"] != "nan" for r in rows)  # TRCA records reach every run's metrics
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["trajectories_to_target"]) == {"grpo", "trca"}
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (out / "curves.svg").read_text()[:500]
    table = (out / "summary.md").read_text()
    assert "| `grpo` |" in table and "| `trca` |" in table and table in capsys.readouterr().out
    # --held-out: every run evaluated after training (the word task declares no held-out env, so
    # the evaluation says it is not held out), each seed's rate kept, the seed mean in the table
    held = list(csv.DictReader(open(out / "held_out.csv")))
    assert {(r["estimator"], r["seed"]) for r in held} == {(e, s) for e in ("grpo", "trca") for s in ("0", "1")}
    assert all(r["held_out"] == "False" and int(r["episodes"]) >= 1 for r in held)
    for est, stats in summary["held_out_success"].items():
        rates = [float(r["success_rate"]) for r in held if r["estimator"] == est]
        assert stats["mean"] == pytest.approx(sum(rates) / 2) and stats["min"] == min(rates)
        assert f"| `{est}` |" in table and f"{stats['mean']:.3f} ({stats['min']:.2f}-{stats['max']:.2f}) |" in table
    for run in (out / "runs").iterdir():
        assert "after" in json.loads((run / "evaluations.json").read_text())


def test_a_study_without_its_objective_is_refused(tmp_path, capsys):
    """Without a stated objective each estimator would train with its own defaults, and the
    comparison would measure those too."""
    rc = _study(tmp_path / "study", sets=[s for s in TINY_WORD_TASK if s not in OBJECTIVE[1:]])
    assert rc == 2
    out = capsys.readouterr().out
    assert "algorithm.loss_aggregation" in out and "algorithm.skip_zero_advantage" in out
    assert "algorithm.ratio_level" not in out.split("set ", 1)[1].split(" (e.g.")[0]  # that one is stated
    assert not (tmp_path / "study").exists()


@pytest.mark.slow
def test_a_matched_study_trains_every_estimator_with_one_objective_and_one_first_batch(tmp_path):
    """GRPO, RLOO, GiGPO and TRCA, one iteration each: the same objective in every run's
    config, the same first batch (same tasks, seeds and sampled responses: the advantages are
    all that differs), and a study run again trains only what had not finished."""
    import yaml

    out = tmp_path / "study"
    estimators = ("grpo", "rloo", "gigpo", "trca")
    args = ["study", "--estimators", ",".join(estimators), "--seeds", "0", "--trajectories", "2",
            "--output-dir", str(out), *[a for s in [*TINY_WORD_TASK, "run.threads=1"] for a in ("--set", s)]]
    assert main(args) in (0, 1)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objective"]["ratio_level"] == "token" and summary["objective"]["skip_zero_advantage"] is False
    runs = {e: out / "runs" / f"{e}-seed0" for e in estimators}
    objectives, batches = set(), set()
    for run in runs.values():
        algorithm = yaml.safe_load((run / "config.yaml").read_text())["algorithm"]
        objectives.add(tuple(algorithm[k] for k in summary["objective"]))
        first = sorted((run / "trajectories").glob("*1.jsonl"))[0]
        batches.add(tuple((t["task_id"], t["seed"], tuple(s["response"] for s in t["transitions"]))
                          for t in map(json.loads, first.read_text().splitlines())))
    assert len(objectives) == 1 and len(batches) == 1
    # benchmarks/study_divergence.py reads the same: one first batch, the reference at distance 0
    spec = importlib.util.spec_from_file_location("study_divergence", ROOT / "benchmarks" / "study_divergence.py")
    divergence = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(divergence)
    report = divergence.divergence(out)["seeds"]["0"]["estimators"]
    assert set(report) == set(estimators)
    assert all(r["same_responses_by_iteration"] == {"1": True} for r in report.values())
    assert report["grpo"]["adapter_max_abs_difference"] == 0.0
    assert all(r["rl_update_max_abs"] is not None for r in report.values())
    rows = list(csv.DictReader(open(out / "study.csv")))
    (runs["gigpo"] / "study_run.json").unlink()  # as if the study had stopped during that run
    kept = {e: (runs[e] / "study_run.json").stat().st_mtime_ns for e in estimators if e != "gigpo"}
    assert main(args) in (0, 1)
    assert {e: (runs[e] / "study_run.json").stat().st_mtime_ns for e in kept} == kept  # not trained again
    assert list(csv.DictReader(open(out / "study.csv"))) == rows


def test_study_refuses_unknown_estimators(capsys):
    assert main(["study", "--estimators", "grpo,ppo"]) == 2
    assert "unknown advantage estimator 'ppo'" in capsys.readouterr().out


@pytest.mark.slow
def test_parallel_study_gives_the_serial_study_s_rows(tmp_path):
    """--jobs 2 trains the runs in two spawned processes; with one thread per run the curves are
    the serial study's, row for row."""
    sets = [*TINY_WORD_TASK, "run.threads=1"]
    assert _study(tmp_path / "serial", sets=sets) in (0, 1)
    assert _study(tmp_path / "parallel", "--jobs", "2", sets=sets) in (0, 1)
    serial = list(csv.DictReader(open(tmp_path / "serial" / "study.csv")))
    parallel = list(csv.DictReader(open(tmp_path / "parallel" / "study.csv")))
    assert len(serial) == 8 and parallel == serial
    summary = json.loads((tmp_path / "parallel" / "summary.json").read_text())
    assert summary["settings"]["jobs"] == 2 and summary["failed_runs"] == {}


def test_a_failed_run_is_reported_and_the_exit_code_says_so(tmp_path, capsys):
    out = tmp_path / "study"
    rc = _study(out, sets=[*TINY_WORD_TASK, "env.factory=no-such-factory"])
    assert rc == 3
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["failed_runs"]) == {"grpo-seed0", "grpo-seed1", "trca-seed0", "trca-seed1"}
    assert all("no env factory 'no-such-factory' is registered" in error for error in summary["failed_runs"].values())
    assert "failed run `trca-seed1`" in (out / "summary.md").read_text()
    assert list(csv.DictReader(open(out / "study.csv"))) == []
