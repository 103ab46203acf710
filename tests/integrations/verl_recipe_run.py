"""Run by tests/integrations/test_verl_recipe.py with the verl venv's python (.venvs/verl): the
GPU recipe (examples/verl_alfworld/) checked as far as a CPU allows.

    .venvs/verl/bin/python tests/integrations/verl_recipe_run.py OUT_DIR

For the full and the smoke launch script: ``prepare_data.py`` writes the rows and the agent-loop
yaml; the script's overrides, with its variables filled in, compose against verl 0.9.1's own
``ppo_trainer`` config (Hydra, as ``main_ppo`` composes it) and pass verl's ``validate_config``
and its rollout config's dataclass conversion. Prints one JSON line of what each came to.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "examples" / "verl_alfworld"
sys.path.insert(0, str(RECIPE))
import prepare_data  # noqa: E402


def overrides(script: Path, variables: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The script's ``main_ppo`` overrides with its variables filled in, and what it exports."""
    text = script.read_text(encoding="utf-8").replace("\\\n", " ")
    exports = dict(re.findall(r"^export (\w+)=(\S+)$", text, flags=re.M))
    command = text[text.index("-m verl.trainer.main_ppo"):].split('"$@"')[0]
    command = re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), m.group(0)), command)
    return shlex.split(command)[2:], exports


def check(script: Path, data: Path, ngpus: str) -> dict[str, Any]:
    args, exports = overrides(script, {"MODEL": "/models/Qwen2.5-1.5B-Instruct", "DATA": str(data), "NGPUS": ngpus})
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=args)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    named = [cfg.data.train_files, cfg.data.val_files, rollout.agent.agent_loop_config_path]
    loop = OmegaConf.load(rollout.agent.agent_loop_config_path)
    return {
        "overrides": len(args), "exports": exports, "external_lib": cfg.actor_rollout_ref.model.external_lib, "use_v1": cfg.trainer.use_v1,
        "adv_estimator": cfg.algorithm.adv_estimator, "need_critic": need_critic(cfg),
        "rollout": {"name": rollout.name, "mode": rollout.mode, "n": rollout.n, "prompt_length": rollout.prompt_length,
                    "response_length": rollout.response_length, "max_model_len": rollout.max_model_len},
        "files_exist": all(Path(p).is_file() for p in named),
        "agent_loop": OmegaConf.to_container(loop),
    }


def main(out: str) -> None:
    results = {}
    for name, script, flags, ngpus in (("full", "run_trca.sh", [], "2"), ("smoke", "run_trca_smoke.sh", ["--smoke"], "1")):
        data = prepare_data.main([str(Path(out) / name), *flags])
        results[name] = check(RECIPE / script, data, ngpus)
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    try:  # the check can fail: a key verl does not have is refused
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            compose(config_name="ppo_trainer", overrides=["actor_rollout_ref.rollout.group_size=8"])
        results["misspelt"] = "no error"
    except Exception as exc:  # noqa: BLE001  (Hydra's ConfigCompositionException; recorded, asserted on)
        results["misspelt"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
