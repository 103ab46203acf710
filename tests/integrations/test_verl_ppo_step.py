"""One PPO step of verl 0.9.1's own trainer code on CPU with rubricgym's advantages (issue 55,
test 4c; docs/verl.md). ``python -m verl.trainer.main_ppo`` cannot run on CPU (it asks Ray for
GPUs, opens NCCL, has training engines for CUDA and NPU only and GPU rollout servers only), so
the runner runs the actor side of the legacy trainer's step in one process: verl's
``ActorRolloutRefWorker`` with its FSDP2 engine (a tiny random Qwen2), the trainer's own
``_compute_old_log_prob``, ``extract_reward``, ``compute_advantage`` with
``algorithm.adv_estimator=rubricgym_trca`` (registered through ``model.external_lib``) and
``_update_actor``, on real ALFWorld episodes. verl has no CPU platform; the runner registers one
with verl's ``set_platform`` (tests/integrations/verl_ppo_step_run.py says what else it sets).
Runs in the verl venv (``.venvs/verl``, mk/verl.mk)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from requirements_guard import need, need_path

ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = ROOT / ".venvs" / "verl" / "bin" / "python"
ESTIMATOR = "rubricgym_trca"

# one xdist worker runs the module, so its fixture (a verl run) runs once, not once per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("verl-ppo-step")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    need_path(VERL_PYTHON, "make setup builds the verl venv (make verl-venv, mk/verl.mk)")
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    work = tmp_path_factory.mktemp("verl_ppo_step")
    done = subprocess.run([str(VERL_PYTHON), str(ROOT / "tests" / "integrations" / "verl_ppo_step_run.py"), str(work)],
                          cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_verl_s_actor_update_changes_every_trainable_weight(run):
    w = run["weights"]
    assert w["tensors"] > 0 and w["changed"] == w["tensors"], w  # weight decay 0: only the gradient moves them
    assert 0 < w["max_change"] < 2e-3, w  # AdamW's first step at lr 1e-3
    assert run["metrics"]["actor/grad_norm"] > 0 and math.isfinite(run["metrics"]["actor/grad_norm"])


def test_the_update_s_advantages_are_rubricgym_s_token_for_token(run):
    assert run["adv_estimator"] == ESTIMATOR
    adv = run["advantages"]
    assert adv["equal"] and adv["max_abs_diff"] == 0.0, adv  # = completion_advantages, group by group
    assert adv["inside_response_mask"] and adv["only_action_tokens"], adv  # TRCA: action tokens only
    assert adv["nonzero_tokens"] > 0 and adv["distinct_values"] >= 2, adv
    assert run["rows"] == 6 and run["reward_is_rm_scores"]


def test_the_pg_loss_is_the_mean_advantage_over_response_mask_tokens(run):
    m = run["metrics"]
    # the first update starts at the old policy (ratio 1): verl's token-mean pg loss is minus the
    # mean advantage over the response_mask tokens, not over the whole response region
    assert m["actor/pg_loss"] == pytest.approx(run["minus_mean_advantage_on_response_mask"], abs=1e-6)
    assert run["response_tokens"] < run["response_region_tokens"]  # observation tokens lie between the replies
    assert abs(run["minus_mean_advantage_on_response_region"] - m["actor/pg_loss"]) > 1e-3
    assert m["actor/ppo_kl"] == pytest.approx(0.0, abs=1e-6)  # compute_log_prob and the update's forward agree
    assert m["actor/pg_clipfrac"] == 0.0 and m["actor/pg_clipfrac_lower"] == 0.0


def test_tokens_outside_response_mask_do_not_reach_the_update(run):
    w = run["weights"]
    assert w["junk_run_same_start"], w
    assert w["junk_run_max_diff"] == 0.0, w  # advantages of 1000 off the mask: the very same weights after
    assert run["junk_metrics"]["actor/pg_loss"] == pytest.approx(run["metrics"]["actor/pg_loss"], abs=1e-7)


def test_the_metrics_come_back(run):
    keys = {"actor/pg_loss", "actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl", "actor/grad_norm",
            "actor/lr", "actor/loss"}
    assert keys <= set(run["metrics"]), sorted(run["metrics"])
    assert all(math.isfinite(run["metrics"][k]) for k in keys)
    assert run["metrics"]["actor/lr"] == pytest.approx(1e-3)
    assert run["old_log_prob_gap"] < 1e-4  # verl's old log-probs = a plain forward pass's, on the replies
    assert run["entropy_finite"]


def test_external_lib_registers_the_estimators_where_the_config_is_read(run):
    # actor_rollout_ref.model.external_lib=rubricgym.integrations.verl: imported when verl builds
    # the model config, which its TaskRunner (the process that calls compute_advantage) does first
    assert run["external_lib"] == {"registered_before": False, "registered_after": True}


def test_verl_itself_has_no_cpu_platform_or_cpu_engine(run):
    # why the runner sets its own platform; if a verl release adds them, the shim can go
    own = run["verl_own_platform"]
    assert own["device"] != "cpu" and "cpu" not in own["registered"] and not own["set_before_ours"], own
    assert "cpu" not in run["fsdp_engine_devices"], run["fsdp_engine_devices"]
