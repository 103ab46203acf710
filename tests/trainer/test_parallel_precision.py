"""Mixed precision and accelerate config files: a config written by ``accelerate config``
itself trains under bf16 autocast on CPU and resumes exactly; settings the trainer cannot apply
are refused with their reason before anything loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from rubricgym.trainers.checkpoint import ADAPTER_FILE, STATE_FILE, list_checkpoints
from rubricgym.cli import main as cli_main
from rubricgym.trainers.config import load_config
from rubricgym.trainers.parallel.choose import plan_for
from rubricgym.trainers.parallel.plan import ParallelPlan, ParallelRefused
from rubricgym.trainers.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).with_name("accelerate")
SETTINGS = [
    "model.name=tiny", "env.factory=word", "env.max_steps=2",
    "algorithm.advantage=grpo", "algorithm.group_size=3", "algorithm.tasks_per_iteration=2",
    "algorithm.epochs=2", "algorithm.lr=0.01", "algorithm.micro_batch_size=4", "algorithm.entropy_coef=0.05",
    "algorithm.skip_zero_advantage=false", "generation.max_new_tokens=10", "prompt.max_prompt_tokens=40",
    "run.iterations=2", "run.progress=false", "run.evaluate_after=false", "run.tensorboard=false",
    "warmup.enabled=false",
]
VOLATILE = ("time/", "throughput/", "memory/")


def written_by_accelerate(path: Path, *flags: str) -> Path:
    """A config file as the ``accelerate config`` CLI itself writes it."""
    out = subprocess.run([str(ACCELERATE), "config", "default", *flags, "--config_file", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return path


def stable(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(VOLATILE)}


def adapter(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(list_checkpoints(run)[-1] / ADAPTER_FILE))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_from_an_accelerate_written_config_trains_and_resumes_exactly(tmp_path, precision):
    """bf16 and fp16 (with its loss scale, kept in the checkpoint) from a config file the
    accelerate CLI wrote, as it is."""
    config_file = written_by_accelerate(tmp_path / "accelerate.yaml", "--mixed_precision", precision)
    assert yaml.safe_load(config_file.read_text())["mixed_precision"] == precision  # accepted as it is
    settings = [*SETTINGS, f"run.accelerate_config={config_file}"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]

    full = Trainer(load_config(None, settings), tmp_path / "full")
    assert full.parallel.plan == ParallelPlan(mixed_precision=precision)
    assert f"{precision} autocast" in full.parallel.start_line()
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad(), full.parallel.autocast():  # the training forwards run in 16 bits; the weights stay float32
        low = full.model(input_ids=ids).logits
    with torch.no_grad():
        high = full.model(input_ids=ids).logits
    assert low.dtype == dtype and high.dtype == torch.float32 and not torch.equal(low.float(), high)
    assert all(p.dtype == torch.float32 for p in full.model.parameters() if p.requires_grad)
    full.train()
    full.close()
    metrics = full.read_metrics()
    assert [m["iteration"] for m in metrics] == [1, 2] and metrics[1]["kl"] > 0  # the update really ran

    part = Trainer(load_config(None, settings), tmp_path / "part")
    part.train(stop_after=1)
    part.close()
    resumed = Trainer.from_run_dir(tmp_path / "part")
    assert resumed.parallel.plan.mixed_precision == precision  # the run's own config says so on resume
    scale = json.loads((list_checkpoints(tmp_path / "part")[-1] / STATE_FILE).read_text())["loss_scale"]
    assert (scale is not None and scale["scale"] > 1) if precision == "fp16" else scale is None
    assert resumed.parallel.loss_scale_state() == (scale if precision == "fp16" else None)
    resumed.train()
    resumed.close()
    assert stable(resumed.read_metrics()[1]) == stable(metrics[1])
    whole, again = adapter(tmp_path / "full"), adapter(tmp_path / "part")
    assert whole.keys() == again.keys() and all(torch.equal(whole[k], again[k]) for k in whole)


def test_an_offload_setting_is_refused_with_its_reason(tmp_path, capsys):
    config_file = tmp_path / "fsdp_offload.yaml"
    config_file.write_text(yaml.safe_dump({
        "compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "mixed_precision": "no",
        "num_processes": 2, "fsdp_config": {"fsdp_version": 2, "fsdp_offload_params": True}}))
    with pytest.raises(ParallelRefused, match="offloading the parameters .*never written"):
        plan_for(load_config(None, [f"run.accelerate_config={config_file}"]).run, {})
    code = cli_main(["train", *[a for s in SETTINGS for a in ("--set", s)], "--set",
                     f"run.accelerate_config={config_file}", "--output-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and "fsdp_offload_params" in err and "pickle-free" in err
    assert not (tmp_path / "runs").exists()  # before anything loads


@pytest.mark.parametrize("settings, environ, message", [
    (["run.mixed_precision=fp16", "run.fsdp=true"], {}, "sharded scaler"),
    (["run.deepspeed_zero=3"], {"ACCELERATE_MIXED_PRECISION": "fp16"}, "fp16 engine config"),
    (["run.deepspeed_zero=2", "run.mixed_precision=bf16"], {}, "DeepSpeed applies mixed precision"),
    ([], {"FSDP_OFFLOAD_PARAMS": "true", "ACCELERATE_USE_FSDP": "true"}, "offloading the parameters"),
])
def test_precision_and_offload_the_engine_cannot_apply_are_refused(settings, environ, message):
    with pytest.raises(ParallelRefused, match=message):
        plan_for(load_config(None, settings).run, environ)


def test_the_launcher_s_precision_applies_and_the_run_config_wins():
    assert plan_for(load_config(None, []).run, {"ACCELERATE_MIXED_PRECISION": "bf16"}).mixed_precision == "bf16"
    run = load_config(None, ["run.mixed_precision=no"]).run
    assert plan_for(run, {"ACCELERATE_MIXED_PRECISION": "bf16"}).mixed_precision == "no"
