"""benchmarks/demo_seeds.py (issue 51, item 3): the main job's RL phase repeated from one warm
start over seeds, with each seed's held-out gain and their interval; a second invocation
resumes instead of redoing. Tiny model and the word env: the code path, not the learning (GRPO
against RLOO here: the tiny model's 8-token replies parse no action, which leaves TRCA, trained
on action tokens, nothing to train; the script's default pair is TRCA against GRPO)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [
    "model.name=tiny", "env.factory=trca-word", "env.max_steps=2", "env.kwargs={num_tasks: 6}",
    "algorithm.group_size=4", "algorithm.tasks_per_iteration=1", "algorithm.lr=0.01", "algorithm.kl_coef=0.05",
    "algorithm.entropy_coef=0.1", "algorithm.skip_zero_advantage=false",
    "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40",
    "warmup.steps=3", "warmup.lr=0.01", "warmup.games=2", "run.iterations=2", "run.progress=false",
    "run.tensorboard=false",
]


def _script():
    spec = importlib.util.spec_from_file_location("demo_seeds", ROOT / "benchmarks" / "demo_seeds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_batch(run: Path) -> list[list[str]]:
    lines = (run / "trajectories" / "iter-000001.jsonl").read_text().splitlines()
    return [[s["response"] for s in json.loads(line)["transitions"]] for line in lines]


def test_seeds_repeat_rl_from_one_warm_start_and_a_rerun_resumes(tmp_path, monkeypatch):
    demo_seeds = _script()
    out, result = tmp_path / "seeds", tmp_path / "seeds.json"
    args = ["--output-dir", str(out), "--json", str(result), "--advantage", "grpo", "--seeds", "0,1",
            "--baseline", "rloo", "--baseline-seeds", "0",
            *[a for kv in SETTINGS for a in ("--set", kv)]]
    assert demo_seeds.main(args) == 0
    report = json.loads(result.read_text())
    warm = json.loads((out / "warm-start" / "warmup.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == ["grpo-seed0", "grpo-seed1", "rloo-seed0", "warm-start"]
    # the warm start as RL found it: how peaked the policy was, and any DAgger rounds
    assert report["warm_start"]["policy_entropy"] == warm["policy_entropy"]
    assert report["warm_start"]["dagger"] == [] and report["warm_start"]["dagger_demonstrations"] == 0
    for run in report["runs"]:
        folder = out / f"{run['estimator']}-seed{run['seed']}"
        evaluations = json.loads((folder / "evaluations.json").read_text())
        # every run starts from the one warm start: its evaluation after it, and RL's first KL is 0
        assert run["after_warmup"]["successes"] == warm["after"]["successes"]
        assert run["gain"] == pytest.approx(evaluations["after"]["success_rate"] - warm["after"]["success_rate"])
        assert run["per_iteration"][0]["kl"] == pytest.approx(0.0, abs=1e-7)
        assert run["per_iteration"][1]["kl"] > 1e-4  # RL moved the policy
        assert [m["iteration"] for m in run["per_iteration"]] == [1, 2]
    # paired seeds: one seed's estimators sample the same first batch, two seeds do not
    assert _first_batch(out / "grpo-seed0") == _first_batch(out / "rloo-seed0")
    assert _first_batch(out / "grpo-seed0") != _first_batch(out / "grpo-seed1")
    assert len(report["code"]["commit"]) == 40 and report["code"]["rubricgym"]  # which code made the numbers
    grpo = report["estimators"]["grpo"]
    gains = [r["gain"] for r in report["runs"] if r["estimator"] == "grpo"]
    assert grpo["seeds"] == [0, 1] and grpo["gains"] == gains and grpo["mean"] == pytest.approx(sum(gains) / 2)
    assert grpo["ci95"][0] <= grpo["mean"] <= grpo["ci95"][1]
    assert report["target"]["met"] == (grpo["interval_excludes_zero"] and grpo["mean"] > 0)

    # a rerun takes the finished runs as they are; a run whose result was lost resumes from its
    # own final checkpoint (no iteration is trained again) and gets the same result
    lost = json.loads((out / "grpo-seed1" / "result.json").read_text())
    (out / "grpo-seed1" / "result.json").unlink()
    from rubricgym.trainers.trainer import Trainer

    def no_iteration(self):
        raise AssertionError("a finished iteration was trained again")

    monkeypatch.setattr(Trainer, "train_iteration", no_iteration)
    monkeypatch.setattr(Trainer, "warm_start", no_iteration)
    assert demo_seeds.main(args) == 0
    again = json.loads((out / "grpo-seed1" / "result.json").read_text())
    assert again["after"] == lost["after"] and again["gain"] == lost["gain"]


def test_the_aggregate_of_hand_computed_gains():
    demo_seeds = _script()
    runs = [{"estimator": "trca", "seed": s, "gain": g} for s, g in enumerate([0.1, 0.2, 0.3])]
    runs += [{"estimator": "grpo", "seed": s, "gain": g} for s, g in enumerate([0.0, 0.1, 0.1])]
    agg = demo_seeds.aggregate(runs)
    trca = agg["estimators"]["trca"]
    assert trca["gains"] == [0.1, 0.2, 0.3] and trca["mean"] == pytest.approx(0.2)
    # t(0.975, 2) = 4.3027; sd 0.1; half width 4.3027 * 0.1 / sqrt(3) = 0.2484
    assert trca["ci95"] == pytest.approx([0.2 - 0.2484, 0.2 + 0.2484], abs=1e-4)
    assert not trca["interval_excludes_zero"]
    assert agg["paired"]["pair"] == "trca - grpo"
    assert agg["paired"]["difference"]["mean"] == pytest.approx(0.1333, abs=1e-4)
    assert (agg["paired"]["better"], agg["paired"]["worse"]) == (3, 0)  # trca's gain above grpo's on 3 seeds
