"""Several training processes on CPU (gloo): the update equals the one-process update of the
same global batch, a killed rank stops the others within the collective time-out, and the
run resumes exactly. Each rank is a real process (torchrun, or the environment torchrun
sets) running ``rubricgym train`` through tests/trainer/distributed_run.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rubricgym.trainers.checkpoint import list_checkpoints, read_state
from rubricgym.trainers.config import load_config
from rubricgym.trainers.distributed import Ranks, merge_rank_metrics
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("distributed_run.py")
SETTINGS = [
    "model.name=tiny", "env.factory=trainer.word_env:make_word_env", "env.max_steps=2",
    "algorithm.advantage=grpo", "algorithm.group_size=3", "algorithm.tasks_per_iteration=2",
    "algorithm.epochs=2", "algorithm.lr=0.01", "algorithm.micro_batch_size=2", "algorithm.entropy_coef=0.05",
    # a random tiny model never wins (advantages 0): train on KL + entropy so the weights move
    "algorithm.skip_zero_advantage=false", "generation.max_new_tokens=12", "prompt.max_prompt_tokens=40",
    "run.evaluate_after=false", "run.threads=1", "run.tensorboard=false", "run.progress=false",
    "run.keep_checkpoints=5", "warmup.enabled=false",
]
VOLATILE = ("time/", "throughput/", "memory/")
HANG_GUARD_S = 300  # a subprocess still running after this is a hang (the test fails)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_args(settings: list[str]) -> list[str]:
    return [a for s in settings for a in ("--set", s)]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT", "LOCAL_WORLD_SIZE")}
    return {**env, "PYTHONPATH": str(ROOT / "tests"), "OMP_NUM_THREADS": "1", **extra}


def launch_ranks(args: list[str], world: int = 2, **extra: str) -> list[subprocess.Popen]:
    """``world`` processes with the environment torchrun gives its workers."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **extra)
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), *args], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=HANG_GUARD_S)
            out.append((p.returncode, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def adapter(run_dir: Path, iteration: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run_dir / f"checkpoint-{iteration:06d}" / "adapter" / "adapter_model.safetensors"))


def stable(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(VOLATILE)}


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def lora(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def load_samples(path: Path) -> list[StepSample]:
    rows = json.loads(path.read_text())
    for row in rows:
        for span in ("reasoning_tokens", "action_tokens"):
            row[span] = tuple(row[span]) if row[span] is not None else None
    return [StepSample(**row) for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["token_mean", "rollout_mean_step_mean"])
def test_two_processes_update_like_one_process_on_the_same_global_batch(tmp_path, aggregation):
    settings = [*SETTINGS, "run.iterations=1", f"algorithm.loss_aggregation={aggregation}"]
    record = tmp_path / "record"
    record.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), str(SCRIPT), *cli_args(settings), "--set", "run.name=two",
           "--output-dir", str(tmp_path)]
    out = subprocess.run(cmd, env=child_env(RUBRICGYM_TEST_RECORD=str(record)), cwd=ROOT, capture_output=True,
                         text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr[-3000:]
    shares = [load_samples(record / f"samples-rank{r}-iter1.json") for r in (0, 1)]
    tokens = [sum(sum(s.loss_mask) for s in share) for share in shares]
    assert all(tokens) and tokens[0] != tokens[1], tokens  # the global denominator really differs from each local one
    from safetensors.torch import load_file

    rank_weights = [load_file(str(record / f"weights-rank{r}-iter1.safetensors")) for r in (0, 1)]
    assert all(torch.equal(rank_weights[0][k], rank_weights[1][k]) for k in rank_weights[0])  # ranks agree exactly
    saved = adapter(tmp_path / "two", 1)

    # one process, the same config (the same initial adapter), the union of both ranks' samples
    reference = Trainer(load_config(None, settings), tmp_path / "one")
    start = lora(reference)
    stats = reference.update(shares[0] + shares[1], 1)
    after = lora(reference)
    reference.close()
    assert any(not torch.allclose(start[k], after[k]) for k in after)  # the update moved the adapter
    for name, value in after.items():
        torch.testing.assert_close(rank_weights[0][name], value, rtol=1e-5, atol=1e-5)
    assert len(saved) == len(after)  # rank 0's checkpoint holds the same adapter
    assert all(torch.equal(saved[k.replace(".default", "")], v) for k, v in rank_weights[0].items())
    logged = metrics(tmp_path / "two")[0]
    assert logged["trained_tokens"] == stats["trained_tokens"] == float(sum(tokens))  # global (per epoch)
    for key in ("loss", "kl", "entropy", "grad_norm", "trained_samples", "update_tokens"):
        assert logged[key] == pytest.approx(stats[key], rel=1e-5, abs=1e-7), key

    # the comparison can fail: one rank's share alone gives another update
    alone = Trainer(load_config(None, settings), tmp_path / "alone")
    alone.update(shares[0], 1)
    moved = lora(alone)
    alone.close()
    assert any(not torch.allclose(moved[k], after[k], rtol=1e-5, atol=1e-5) for k in after)


@pytest.mark.slow
def test_a_killed_rank_stops_the_other_and_the_run_resumes_exactly(tmp_path):
    settings = [*SETTINGS, "run.iterations=3", "run.collective_timeout_s=30"]
    full = finish(launch_ranks([*cli_args(settings), "--set", "run.name=full", "--output-dir", str(tmp_path)]))
    assert [code for code, _ in full] == [0, 0], full[0][1][-3000:]

    # rank 1 is SIGKILLed as iteration 2 starts (after checkpoint 1): rank 0 must stop by itself
    killed = finish(launch_ranks([*cli_args(settings), "--set", "run.name=killed", "--output-dir", str(tmp_path)],
                                 RUBRICGYM_TEST_KILL="1:2"))
    (code0, err0), (code1, _) = killed
    assert code1 == -signal.SIGKILL
    assert code0 == 3, err0[-3000:]
    assert "rank 0 of 2" in err0 and "another rank died or did not answer" in err0 and "--resume" in err0
    run_dir = tmp_path / "killed"
    assert [p.name for p in list_checkpoints(run_dir)] == ["checkpoint-000001"]
    state = read_state(run_dir / "checkpoint-000001")
    assert state.world_size == 2 and [r.rank for r in state.rank_random] == [1]

    resumed = finish(launch_ranks(["--resume", str(run_dir), "--quiet"]))
    assert [code for code, _ in resumed] == [0, 0], resumed[0][1][-3000:]
    assert [stable(m) for m in metrics(run_dir)] == [stable(m) for m in metrics(tmp_path / "full")]
    a, b = adapter(run_dir, 3), adapter(tmp_path / "full", 3)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_env_workers_in_a_two_process_run_give_the_in_process_run(tmp_path):
    """Each rank starts its own env worker pool; the run equals the one whose envs step in the
    training processes (same metrics, same adapter)."""
    settings = [*SETTINGS, "run.iterations=2"]
    inline = finish(launch_ranks([*cli_args(settings), "--set", "run.name=inline", "--output-dir", str(tmp_path)]))
    pooled = finish(launch_ranks([*cli_args(settings), "--set", "env.workers=1", "--set", "env.worker_backend=process",
                                  "--set", "run.name=pooled", "--output-dir", str(tmp_path)]))
    assert [code for code, _ in inline] == [0, 0], inline[0][1][-3000:]
    assert [code for code, _ in pooled] == [0, 0], pooled[0][1][-3000:]
    assert [stable(m) for m in metrics(tmp_path / "pooled")] == [stable(m) for m in metrics(tmp_path / "inline")]
    assert all(m["processes"] == 2 for m in metrics(tmp_path / "pooled"))
    a, b = adapter(tmp_path / "pooled", 2), adapter(tmp_path / "inline", 2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_rank_metrics_merge_as_count_weighted_means():
    parts = [{"metrics": {"success_rate": 1.0, "action_parsed_rate": 0.5, "rollout_errors": 1.0},
              "counts": {"rollouts": 3, "steps": 2, "trca_steps": 0, "compared_groups": 1}},
             {"metrics": {"success_rate": 0.0, "action_parsed_rate": 0.0, "rollout_errors": 2.0},
              "counts": {"rollouts": 1, "steps": 6, "trca_steps": 0, "compared_groups": 1}}]
    merged = merge_rank_metrics(parts)
    assert merged == {"success_rate": 0.75, "action_parsed_rate": 0.125, "rollout_errors": 3.0}


def test_one_process_ranks_are_the_identity():
    ranks = Ranks()
    assert not ranks.distributed and ranks.is_main and ranks.share(3) == [0, 1, 2]
    assert ranks.sum([1, 2.5]) == [1.0, 2.5] and ranks.gather_json({"a": 1}) == [{"a": 1}]
    assert Ranks(rank=1, world_size=2).share(5) == [1, 3]


@pytest.mark.parametrize("variable, plugin", [("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")])
def test_a_sharding_accelerate_config_is_refused_before_anything_loads(tmp_path, variable, plugin):
    """accelerate marks FSDP / DeepSpeed launches with these variables; the trainer replicates the
    model, so it stops with a clear error rather than silently sharding nothing."""
    out = subprocess.run([sys.executable, "-m", "rubricgym.cli", "train", *cli_args(SETTINGS), "--output-dir",
                          str(tmp_path)], env=child_env(**{variable: "true"}), cwd=ROOT, capture_output=True,
                         text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"cannot start: the accelerate config asks for {plugin}" in out.stderr
    assert "configs/accelerate/ddp.yaml" in out.stderr and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_accelerate_launch_with_an_fsdp_config_is_refused_on_every_rank(tmp_path):
    config = tmp_path / "fsdp.yaml"
    config.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_machines: 1\n"
                      "num_processes: 2\nuse_cpu: true\nmixed_precision: 'no'\n"
                      "fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n")
    cmd = [str(Path(sys.executable).with_name("accelerate")), "launch", "--config_file", str(config),
           "--main_process_port", str(free_port()), "-m", "rubricgym.cli", "train", *cli_args(SETTINGS),
           "--output-dir", str(tmp_path / "runs")]
    out = subprocess.run(cmd, env=child_env(), cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode != 0
    assert (out.stdout + out.stderr).count("cannot start: the accelerate config asks for FSDP") == 2
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_accelerate_launch_with_the_shipped_config(tmp_path):
    settings = [*SETTINGS, "run.iterations=1"]
    cmd = [str(Path(sys.executable).with_name("accelerate")), "launch", "--config_file",
           str(ROOT / "configs" / "accelerate" / "ddp.yaml"), "--main_process_port", str(free_port()),
           "-m", "rubricgym.cli", "train", *cli_args(settings), "--set", "run.name=acc", "--output-dir", str(tmp_path)]
    out = subprocess.run(cmd, env=child_env(), cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr[-3000:]
    logged = metrics(tmp_path / "acc")
    assert [m["processes"] for m in logged] == [2] and logged[0]["trained_samples"] > 0
    assert out.stdout.count("rubricgym train: tiny on") == 1  # rank 0 speaks for the run


@pytest.mark.slow
def test_a_silent_rank_ends_the_run_at_the_collective_time_out(tmp_path):
    settings = [*SETTINGS, "run.iterations=3", "run.collective_timeout_s=10"]
    # rank 1 SIGSTOPs itself as iteration 2 starts: alive, connected, silent
    procs = launch_ranks([*cli_args(settings), "--set", "run.name=silent", "--output-dir", str(tmp_path)],
                         RUBRICGYM_TEST_KILL="1:2:STOP")
    try:
        _, err = procs[0].communicate(timeout=HANG_GUARD_S)
        assert procs[1].poll() is None  # still there, stopped: only the time-out ended rank 0's wait
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert procs[0].returncode == 3, err[-3000:]
    assert "rank 0 of 2" in err and "run.collective_timeout_s=10 s" in err and "--resume" in err


@pytest.mark.slow
def test_two_processes_update_like_one_with_nonzero_advantages_for_every_aggregation(tmp_path):
    """Fixed step samples with nonzero advantages, different lengths, masks and rollout
    lengths (tests/trainer/distributed_update.py): 2 ranks (6 and 5 samples) against 1."""
    from safetensors.torch import load_file

    script = str(Path(__file__).with_name("distributed_update.py"))
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                          "127.0.0.1", "--master_port", str(free_port()), script, str(tmp_path)], env=child_env(),
                         cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run([sys.executable, script, str(tmp_path)], env=child_env(), cwd=ROOT, capture_output=True,
                         text=True, timeout=HANG_GUARD_S)
    assert one.returncode == 0, one.stderr[-3000:]
    results = {}
    for aggregation in ("token_mean", "step_mean", "rollout_mean_step_mean"):
        w1, w2 = (load_file(str(tmp_path / f"{aggregation}-w{w}.safetensors")) for w in (1, 2))
        for name in w1:  # measured: at most ~1e-5 apart (float sums in another order, Adam's first steps)
            torch.testing.assert_close(w2[name], w1[name], rtol=1e-4, atol=1e-4)
        results[aggregation] = w1
    # the three objectives move the adapter apart by far more than the tolerance (measured ~0.04)
    def gap(a: str, b: str) -> float:
        return max(float((results[a][n] - results[b][n]).abs().max()) for n in results[a])

    assert gap("token_mean", "step_mean") > 1e-2 and gap("step_mean", "rollout_mean_step_mean") > 1e-2
