"""The README's main-job paragraph quotes the measured run (benchmarks/results/demo_cpu.json),
and the shipped main-job config is the embedded defaults that run used."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rubricgym.trainers.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "benchmarks" / "results" / "demo_cpu.json"
LABELS = ("before", "after_warmup", "after")
# the settings that decide what the main job measures; the result must be of the current defaults
DECISIVE = {"model": ("name",), "env": ("id", "max_steps"), "warmup": ("games", "steps", "batch_size", "lr"),
            "algorithm": ("advantage", "group_size", "tasks_per_iteration", "lr"),
            "generation": ("temperature", "max_new_tokens"), "run": ("iterations", "seed"),
            "evaluation": ("greedy",)}


def main_job_paragraph() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("The main job (`make demo`")
    end = text.find("\n\n", start)
    return " ".join(text[start : end if end >= 0 else len(text)].split())


def quoted_numbers(result: dict) -> list[str]:
    """How the README writes each number of the result."""
    ev = [result["evaluations"][label] for label in LABELS]
    out = [f"{e['successes']}/{e['episodes']} ({100 * e['success_rate']:.0f}%, 95% CI "
           f"{100 * e['success_ci95_low']:.0f}-{100 * e['success_ci95_high']:.0f}%)" for e in ev]
    out.append(" -> ".join(f"{100 * e['action_parsed_rate']:.0f}%" for e in ev))
    out.append(" -> ".join(f"{e['trca_reward_mean']:+.3f}" for e in ev))
    out.append(f"{result['wall_s'] / 60:.0f} minutes")
    out.append(f"load average {result['load_average_end'][0]:.1f}")
    out.append(str(result["date"])[:10])
    return out


def test_readme_quotes_the_measured_main_job():
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    paragraph = main_job_paragraph()
    assert "benchmarks/results/demo_cpu.json" in paragraph
    missing = [q for q in quoted_numbers(result) if q not in paragraph]
    assert not missing, f"the README's main-job paragraph does not quote {missing}"
    met = result["target"]["met"]
    assert ("target met" in paragraph) == met and ("target not met" in paragraph) == (not met)


def test_the_measured_run_used_the_current_defaults():
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    defaults = TrainConfig().model_dump(mode="json")
    for section, keys in DECISIVE.items():
        for key in keys:
            assert result["config"][section][key] == defaults[section][key], f"{section}.{key}"
    assert result["evaluations"]["after"]["held_out"] and result["eval_decoding"] == "greedy"


def test_the_shipped_main_job_config_is_the_embedded_defaults():
    shipped = yaml.safe_load((ROOT / "configs" / "alfworld_smollm2_cpu.yaml").read_text(encoding="utf-8"))
    assert TrainConfig.model_validate(shipped) == TrainConfig()
