"""benchmarks/study_warm_start.py: an LLM study run's checkpoint at iteration 0, evaluated again
on the held-out tasks, gives what the run itself measured right after its warm start."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from rubricgym.trainers.config import load_config
from rubricgym.trainers.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [
    "model.name=tiny", "env.factory=trca-word", "env.max_steps=2", "env.kwargs={num_tasks: 6}",
    "algorithm.advantage=grpo", "algorithm.group_size=4", "algorithm.lr=0.05", "algorithm.skip_zero_advantage=false",
    "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40", "warmup.steps=3", "warmup.lr=0.01",
    "warmup.games=2", "run.iterations=2", "run.progress=false", "run.tensorboard=false", "run.keep_checkpoints=5",
]


def test_the_warm_start_checkpoint_is_evaluated_as_the_run_evaluated_it(tmp_path):
    spec = importlib.util.spec_from_file_location("study_warm_start", ROOT / "benchmarks" / "study_warm_start.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = tmp_path / "study" / "runs" / "grpo-seed3"
    trainer = Trainer(load_config(None, SETTINGS), run)
    trainer.train()
    measured = trainer.evaluations()["after_warmup"]
    trainer.close()
    kept = (run / "evaluations.json").read_text()
    out = tmp_path / "warm.json"
    assert module.main([str(tmp_path / "study"), "--json", str(out)]) == 0
    per_seed = json.loads(out.read_text())["per_seed"]
    assert list(per_seed) == ["3"] and per_seed["3"]["run"] == "grpo-seed3"
    again = per_seed["3"]
    assert again["iteration"] == 0  # the warm start, not the run's final checkpoint
    # the same policy on the same tasks, greedy: the same episodes (the return is the finest check)
    assert [again[k] for k in ("episodes", "successes", "return_mean", "action_parsed_rate")] == \
        [measured[k] for k in ("episodes", "successes", "return_mean", "action_parsed_rate")]
    assert (run / "evaluations.json").read_text() == kept  # evaluated in a scratch copy: the run is untouched
    # under another setting (a one-step budget) the same checkpoint plays shorter episodes
    short = tmp_path / "short.json"
    assert module.main([str(tmp_path / "study"), "--set", "env.max_steps=1", "--json", str(short)]) == 0
    one_step = json.loads(short.read_text())
    assert one_step["overrides"] == ["env.max_steps=1"] and one_step["per_seed"]["3"]["steps_mean"] == 1
    assert again["steps_mean"] > 1  # the run's own budget (2) was used above: the override did something
