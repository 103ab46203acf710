"""The verl GPU recipe (issue 55 item 5; examples/verl_alfworld/, docs/verl.md) checked on CPU:
its data and agent-loop yaml are written by rubricgym's helpers, both launch scripts' overrides
compose against verl 0.9.1's own config and pass its validate_config, and the module the scripts
name in ``model.external_lib`` registers rubricgym's estimators in a fresh verl process when verl
imports it the way its model config does (tests/integrations/test_verl_ppo_step.py checks that
verl's own config does it). The run itself needs GPUs and vLLM (scripts/gpu_check.sh)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from requirements_guard import need_path

ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = ROOT / ".venvs" / "verl" / "bin" / "python"
LOOKUP = ("import sys; from verl.utils.import_utils import import_external_libs; "
          "from verl.trainer.ppo.core_algos import get_adv_estimator_fn; import_external_libs(sys.argv[1] or None); "
          "print(get_adv_estimator_fn('rubricgym_trca').__name__)")

# one xdist worker runs the module, so its fixture (a verl run) runs once, not once per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("verl-recipe")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    need_path(VERL_PYTHON, "make setup builds the verl venv (make verl-venv, mk/verl.mk)")
    out = tmp_path_factory.mktemp("verl_recipe")
    done = subprocess.run([str(VERL_PYTHON), str(ROOT / "tests" / "integrations" / "verl_recipe_run.py"), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["full", "smoke"])
def test_the_launch_script_composes_and_validates_in_verl(run, name):
    got = run[name]
    assert got["adv_estimator"] == "rubricgym_trca" and got["use_v1"] is False and got["need_critic"] is False, got
    assert got["rollout"]["name"] == "vllm" and got["rollout"]["mode"] == "async", got
    assert got["rollout"]["max_model_len"] >= got["rollout"]["prompt_length"] + got["rollout"]["response_length"], got
    assert got["files_exist"], got
    loop = got["agent_loop"][0]
    assert loop["_target_"] == "rubricgym.integrations.verl_agent_loop.RubricAgentLoop" and loop["prompt"]["style"] == "chat"
    # a whole episode of the loop's turns fits the response budget only if turns x tokens fit it
    assert loop["max_new_tokens"] <= got["rollout"]["response_length"]
    assert (run["full"]["rollout"]["n"], run["smoke"]["rollout"]["n"]) == (8, 4)


def test_a_key_verl_does_not_have_is_refused(run):
    assert "group_size" in run["misspelt"] and run["misspelt"] != "no error"


def test_external_lib_registers_the_estimators_in_a_fresh_verl_process(run):
    lib = run["full"]["external_lib"]
    assert lib == run["smoke"]["external_lib"] == "rubricgym.integrations.verl"
    assert run["full"]["exports"] == run["smoke"]["exports"] == {}  # the config carries it, no environment
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_")}
    with_it = subprocess.run([str(VERL_PYTHON), "-c", LOOKUP, lib], env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert with_it.returncode == 0 and with_it.stdout.strip().endswith("rubricgym_trca"), with_it.stderr[-3000:]
    without = subprocess.run([str(VERL_PYTHON), "-c", LOOKUP, ""], env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert without.returncode != 0 and "rubricgym_trca" in without.stderr
