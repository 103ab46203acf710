"""Reports opened in a real headless Chromium: stored ALFWorld and AppWorld trajectories and a
real short training run (tiny model) with the live view. Checks what a user sees: one table
row per step of each rollout, heat-map cells carrying the stored advantages, curves with one
point per iteration, trajectory <script>/HTML shown as text and never run, no request made.
Screenshots go to the test's temporary folder."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from report_browser import open_report
from report_helpers import (HTML, SCRIPT, dump, heat_cells, page_facts, step_rows, store_advantages,
                            stored_advantages, write)
from requirements_guard import need_path

from rubricgym.report import build_report, write_report
from rubricgym.report.sources import read_metrics

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def check_groups(driver, trajectories, group_id: str | None = None) -> None:
    """One row per step of each rollout; heat-map cells = the stored advantages, coloured."""
    rows = step_rows(driver, group_id)
    expected_rows = [(f"rollout {t.meta['member']}", s.step) for t in trajectories for s in t.transitions]
    assert sorted((r["rollout"], r["step"]) for r in rows) == sorted(expected_rows), dump(rows)
    cells = heat_cells(driver, group_id)
    stored = stored_advantages(trajectories)
    assert len(cells) == len(stored), dump(cells)
    for cell in cells:
        value = stored[(cell["rollout"], cell["step"])]
        assert math.isclose(float(cell["advantage"]), value, rel_tol=1e-9, abs_tol=1e-12), dump(cell)
        assert cell["text"] == f"{value:.3f}"
    nonzero = [c for c in cells if abs(float(c["advantage"])) > 1e-9]
    assert all(c["background"] not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)") for c in nonzero)


def test_alfworld_trajectories_in_chromium(alfworld_trajectories, browser, tmp_path):
    trajectories = alfworld_trajectories
    assert any(abs(a) > 0 for t in trajectories for a in t.meta["step_advantages"])  # a real credit spread
    report = write_report(write(tmp_path / "alfworld.jsonl", trajectories), tmp_path / "alfworld.html")
    requests = open_report(browser, report)
    assert requests == [], requests
    check_groups(browser, trajectories)
    facts = page_facts(browser)
    # the <script> and the <img onerror> of the trajectory are text on the page, never elements
    assert facts["scripts"] == 0 and facts["images"] == 0 and facts["pwned"] is None, dump(facts)
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert SCRIPT in browser.execute_script("return document.body.innerText")
    assert HTML in browser.execute_script("return document.body.innerText")
    # the action tokens carry the step's advantage too
    tokens = browser.execute_script(
        "return Array.from(document.querySelectorAll('tr.step-row .tok')).map(t => t.dataset.advantage)")
    assert tokens and {float(a) for a in tokens} <= {float(a) for t in trajectories for a in t.meta["step_advantages"]}
    # fired operators are grouped by the library's categories
    assert "invalidity" in facts["text"] and "execution" in facts["text"]
    browser.save_screenshot(str(tmp_path / "alfworld.png"))
    assert (tmp_path / "alfworld.png").stat().st_size > 10_000


def test_old_and_new_record_layouts_give_the_same_report(alfworld_trajectories, tmp_path):
    def strip(key: str):
        return [t.model_copy(update={"transitions": [s.model_copy(update={"info": {k: v for k, v in s.info.items()
                                                                                   if k != key}})
                                                     for s in t.transitions]}) for t in alfworld_trajectories]

    only_new = build_report(write(tmp_path / "new.jsonl", strip("trca")))
    only_old = build_report(write(tmp_path / "old.jsonl", strip("rubric")))
    assert only_new.sections == only_old.sections
    steps = [s for g in only_new.sections[0].groups for r in g.rollouts for s in r.steps]
    assert all(s.r_f is not None and s.a_e is not None and s.a_s is not None for s in steps)
    assert any(s.fired.get("execution") for s in steps) and any(s.fired.get("invalidity") for s in steps)


def test_appworld_trajectories_in_chromium(browser, tmp_path):
    need_path(ROOT / ".venvs" / "appworld", "make test builds AppWorld's venv (mk/appworld.mk)")
    need_path(ROOT / ".venvs" / "appworld-data", "make test builds AppWorld's offline tasks")
    import gymnasium as gym

    import rubricgym  # noqa: F401
    from rubricgym.adapters.appworld.tasks import load_catalog

    env = gym.make("AppWorld-Rubric-v0")
    group = []
    try:
        offered = set(env.unwrapped.adapter.task_ids())
        task = next(t for t in load_catalog() if t["id"] in offered)
        for cells in (task["good"], task["bad"], [f"print('{SCRIPT}')"]):
            env.reset(options={"task_id": task["id"]})
            for k, cell in enumerate(cells):
                _, _, terminated, truncated, _ = env.step(f"<think>step {k}</think><action>{cell}</action>")
                if terminated or truncated:
                    break
            group.append(env.unwrapped.trajectory.model_copy(deep=True))
    finally:
        env.close()
    trajectories = store_advantages(group)
    report = write_report(write(tmp_path / "appworld.jsonl", trajectories), tmp_path / "appworld.html")
    assert open_report(browser, report) == []
    check_groups(browser, trajectories)
    facts = page_facts(browser)
    assert facts["scripts"] == 0 and facts["pwned"] is None
    browser.save_screenshot(str(tmp_path / "appworld.png"))


RUN_SETTINGS = [
    "model.name=tiny", "model.device=cpu", "env.id=ALFWorld-Rubric-v0", "env.max_steps=2",
    "algorithm.group_size=2", "algorithm.tasks_per_iteration=1", "algorithm.skip_zero_advantage=false",
    "generation.max_new_tokens=12", "run.iterations=3", "run.progress=false", "run.evaluate_after=false",
    "run.tensorboard=false", "run.report_every=1",
    "warmup.enabled=true", "warmup.games=1", "warmup.steps=2", "warmup.batch_size=1", "warmup.micro_batch_size=1",
]


def test_a_real_run_with_the_live_view_in_chromium(browser, tmp_path, caplog):
    from requirements_guard import need

    need("alfworld", "pip install 'rubricgym[alfworld]'")
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    run_dir = tmp_path / "run"
    trainer = Trainer(load_config(None, RUN_SETTINGS), run_dir)
    seen = []
    try:
        for it in (1, 2, 3):  # the live view: an up-to-date report after every iteration
            trainer.train(stop_after=1, evaluate=False)
            assert trainer.iteration == it
            open_report(browser, run_dir / "report.html")
            seen.append(int(browser.find_element("id", "iterations").get_attribute("data-iterations")))
            refresh = browser.execute_script(
                "return document.querySelector('meta[http-equiv=refresh]') !== null")
            assert refresh == (it < 3)  # a finished run's page stops reloading
    finally:
        trainer.close()
    assert seen == [1, 2, 3]
    assert "writing the run report failed" not in caplog.text

    requests = open_report(browser, run_dir / "report.html")
    assert requests == [], requests
    metrics = read_metrics(run_dir / "metrics.jsonl", [])
    iterations = [m for m in metrics if m.get("phase", "rl") == "rl"]
    assert len(iterations) == 3
    curves = browser.execute_script(
        "return Array.from(document.querySelectorAll('figure.curve')).map(f => ({id: f.id, points: Number("
        "f.dataset.points), keys: f.dataset.keys.split(' '), drawn: f.dataset.keys.split(' ').map("
        "k => f.querySelectorAll('g#curve-' + k + ' use').length)}))")
    by_id = {c["id"]: c for c in curves}
    for name in ("plot-success-rate", "plot-engine-return", "plot-trca-reward-mean-per-step",
                 "plot-parsed-action-rate", "plot-time-per-phase-s", "plot-tokens-per-second"):
        assert by_id[name]["points"] == 3 and set(by_id[name]["drawn"]) == {3}, dump(by_id.get(name))
    assert by_id["plot-warm-start-loss"]["drawn"] == [2]
    evaluations = browser.find_element("id", "evaluations").text
    assert "warm start: before" in evaluations and "warm start: after" in evaluations
    from rubricgym.contract import load_jsonl

    for it in (1, 2, 3):
        stored = load_jsonl(run_dir / "trajectories" / f"iter-{it:06d}.jsonl")
        check_groups(browser, stored, f"it{it}-g0")
    browser.save_screenshot(str(tmp_path / "run.png"))


def test_a_500_iteration_report_stays_small(alfworld_trajectories, tmp_path):
    """500 iterations of metrics and stored trajectories: the report samples what it embeds."""
    import json
    import random

    run = tmp_path / "long"
    (run / "trajectories").mkdir(parents=True)
    (run / "config.yaml").write_text("run:\n  iterations: 500\nalgorithm:\n  advantage: trca\n", encoding="utf-8")
    rng = random.Random(0)
    keys = ("success_rate", "env_return_mean", "trca_reward_mean", "return_mean", "action_parsed_rate", "loss",
            "pg_loss", "kl", "entropy", "clip_frac", "advantage_abs_mean", "throughput/generation_tok_s",
            "throughput/update_tok_s", "time/generation_s", "time/environment_s", "time/tokenization_s",
            "time/credit_s", "time/update_s")
    with open(run / "metrics.jsonl", "w", encoding="utf-8") as fh:
        for it in range(1, 501):
            fh.write(json.dumps({"iteration": it, **{k: rng.random() for k in keys}}) + "\n")
    for it in range(1, 501):
        trajectories = []
        for g in range(4):
            trajectories += [t.model_copy(update={"meta": {**t.meta, "iteration": it, "group": g}})
                             for t in alfworld_trajectories]
        write(run / "trajectories" / f"iter-{it:06d}.jsonl", trajectories)
    out = write_report(run)
    size = out.stat().st_size
    assert size < 5 * 2**20, size
    report = build_report(run)
    assert {c.points for c in report.curves} == {500}
    assert [s.title for s in report.sections] == [f"iteration {i}" for i in (1, 101, 201, 300, 400, 500)]
