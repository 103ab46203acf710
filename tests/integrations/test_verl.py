"""rubricgym's estimators in verl's registry (issue 55, items 2 and 4a; docs/verl.md): on real
ALFWorld episodes (two groups of three rollouts, tokenised with SmolLM2's tokenizer), verl
0.9.1's own ``compute_advantage`` with ``rubricgym_<name>`` gives, token for token, the values
rubricgym's ``completion_advantages`` gives the same episodes (the TRL route's, equal to the own
trainer's: tests/integrations/test_credit_callers.py). verl lives in its own venv
(``.venvs/verl``, mk/verl.mk): the check runs there, in tests/integrations/verl_run.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from requirements_guard import need, need_path

ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = ROOT / ".venvs" / "verl" / "bin" / "python"
NAMES = ["trca", "trca_no_rf", "trca_no_rb", "gigpo", "gigpo_mean", "gigpo_context", "rloo", "grpo"]

# one xdist worker runs the module, so its fixture (a verl run) runs once, not once per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("verl")]


@pytest.fixture(scope="module")
def run() -> dict:
    need_path(VERL_PYTHON, "make setup builds the verl venv (make verl-venv, mk/verl.mk)")
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    from rubricgym.models import smollm2_path

    done = subprocess.run([str(VERL_PYTHON), str(ROOT / "tests" / "integrations" / "verl_run.py"), str(smollm2_path())],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", NAMES)
def test_verl_compute_advantage_equals_rubricgym_s_values(run, name):
    got = run["results"][name]
    assert got["equal"] and got["max_abs_diff"] == 0.0, got
    assert got["returns_equal"] and got["inside_response_mask"], got
    assert got["shape"] == [run["rows"], run["length"]]
    assert got["nonzero_tokens"] > 0 and got["distinct_values"] >= 2, f"{name}: the comparison shows nothing: {got}"
    if name.startswith("trca"):  # rubricgym's placement: TRCA on action tokens only
        assert got["only_action_tokens"], got
    else:
        assert not got["only_action_tokens"], got


def test_the_episodes_make_groups_worth_comparing(run):
    assert run["rows"] == 6
    assert run["successes"].count(True) == 2  # one expert win per group, the rest fail


def test_a_batch_without_the_episode_field_is_refused_with_the_reason(run):
    assert "no 'rubricgym_episode' column" in run["missing_field_error"]
    assert "use_v1" in run["missing_field_error"]


def test_draco_needs_a_judge_and_is_not_registered_without_one(run):
    assert "needs a DRACO judge" in run["draco_without_judge"]
    assert run["draco_registered"] is False


def test_the_rows_env_id_decides_the_outcome_as_in_rubricgym_s_trainer(run):
    """WebShop standardizes success, not the purchase score: a batch carrying the loop's
    rubricgym_env_id gets those values; one without it gets the registration's (the return)."""
    ws = run["webshop_outcome"]
    assert ws["returns"] == [1.0, pytest.approx(2 / 3), 0.0] and ws["successes"] == [True, False, False], ws
    for name in ("grpo", "trca"):
        got = ws[name]
        assert got["benchmark_outcome"] == "success" and got["rules_differ"], got
        assert got["equals_success_rule"] and got["without_env_id_equals_return_rule"], got
