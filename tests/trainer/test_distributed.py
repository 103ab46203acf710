"""Several training processes on CPU (gloo): the update equals the one-process update of the
same global batch, a killed rank stops the others within the collective time-out, and the
run resumes exactly. Each rank is a real process (torchrun, or the environment torchrun
sets) running ``rubricgym train`` through tests/trainer/distributed_run.py. The ranks the
tests start themselves are forked from a warm fork server (tests/fork_server.py) that imported
the trainer once; torchrun and ``accelerate launch`` start fresh interpreters, as for a user."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fork_server import ForkedProcess, ForkServer
from rubricgym.trainers.checkpoint import TENSORS_FILE, list_checkpoints, read_state
from rubricgym.trainers.config import RunSettings, load_config
from rubricgym.trainers.distributed import merge_rank_metrics
from rubricgym.trainers.parallel.base import AgreedLockstep
from rubricgym.trainers.parallel.choose import choose_strategy, plan_for
from rubricgym.trainers.parallel.fsdp import FsdpStrategy
from rubricgym.trainers.parallel.plan import LaunchRequest, ParallelPlan, launch_request
from rubricgym.trainers.parallel.ranks import Ranks
from rubricgym.trainers.parallel.zero import ZeroStrategy, require_deepspeed
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.trainer import Trainer
from safetensors.torch import load_file

from rubricgym.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("distributed_run.py")
ACCELERATE = Path(sys.executable).with_name("accelerate")
SETTINGS = [
    "model.name=tiny", "env.factory=word", "env.max_steps=2",
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


# what every rank imports: the fork server imports it once; where DeepSpeed is installed, also
# the Muon optimizer its ZeRO engine imports to check the optimizer (compiling it takes seconds)
WARM_MODULES = ["torch", "peft", "safetensors.torch", "rubricgym.cli", "rubricgym.trainers.trainer",
                "trainer.word_env", "trainer.split_word_env",
                *(["deepspeed", "deepspeed.runtime.zero.muon.muon_optimizer"] if importlib.util.find_spec("deepspeed")
                  else [])]
RANK_SERVER: list[ForkServer] = []  # this module's fork server, while its tests run


@pytest.fixture(scope="module", autouse=True)
def rank_server():
    server = ForkServer(WARM_MODULES, child_env(), ROOT)
    RANK_SERVER.append(server)
    yield server
    RANK_SERVER.remove(server)
    server.close()


def launch_ranks(args: list[str], world: int = 2, **extra: str) -> list[ForkedProcess]:
    """``world`` processes with the environment torchrun gives its workers, forked from the
    module's fork server."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **extra)
        procs.append(RANK_SERVER[-1].launch(SCRIPT, args, env, ROOT))
    return procs


def accelerate_launch(config: str, args: list[str], **extra: str) -> subprocess.Popen:
    """``accelerate launch`` with the shipped ``configs/accelerate/<config>.yaml`` starting 2 ranks
    of distributed_run.py (what a user runs, with the tests' hooks)."""
    cmd = [str(ACCELERATE), "launch", "--config_file", str(ROOT / "configs" / "accelerate" / f"{config}.yaml"),
           "--num_processes", "2", "--main_process_port", str(free_port()), str(SCRIPT), *args]
    return subprocess.Popen(cmd, env=child_env(**extra), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish_with_output(procs: list[subprocess.Popen | ForkedProcess]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each process; one still running after HANG_GUARD_S is killed."""
    out = []
    try:
        for p in procs:
            stdout, err = p.communicate(timeout=HANG_GUARD_S)
            out.append((p.returncode, stdout, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def finish(procs: list[subprocess.Popen | ForkedProcess]) -> list[tuple[int, str]]:
    return [(code, err) for code, _, err in finish_with_output(procs)]


def assert_all_succeeded(out: list[tuple[int, str]]) -> None:
    """Every rank exited 0; otherwise the first failed rank's stderr is the message."""
    failed = [(rank, code, err) for rank, (code, err) in enumerate(out) if code != 0]
    assert not failed, f"rank {failed[0][0]} exited {failed[0][1]}:\n{failed[0][2][-3000:]}"


def adapter(run_dir: Path, iteration: int) -> dict[str, torch.Tensor]:
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


class SharedRuns:
    """2-rank runs that several tests compare against, each launched once per module: the
    same settings, launcher and environment give the same run, so a test asks for it by those.
    ``accelerate`` names a shipped accelerate config to launch through (else the processes get
    the environment torchrun sets); ``stdout`` keeps what the launch printed."""

    def __init__(self, root: Path):
        self.root = root
        self.runs: dict[tuple, Path] = {}
        self.stdout: dict[Path, str] = {}

    def get(self, name: str, settings: list[str], accelerate: str | None = None, **env: str) -> Path:
        key = (tuple(settings), accelerate, tuple(sorted(env.items())))
        if key not in self.runs:
            args = [*cli_args(settings), "--set", f"run.name={name}", "--output-dir", str(self.root)]
            procs = [accelerate_launch(accelerate, args, **env)] if accelerate else launch_ranks(args, **env)
            out = finish_with_output(procs)
            assert_all_succeeded([(code, err) for code, _, err in out])
            self.runs[key] = self.root / name
            self.stdout[self.root / name] = "".join(stdout for _, stdout, _ in out)
        return self.runs[key]


@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> SharedRuns:
    return SharedRuns(tmp_path_factory.mktemp("shared-runs"))


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


THREE_ITERATIONS = [*SETTINGS, "run.iterations=3", "run.collective_timeout_s=30"]


@pytest.mark.slow
def test_a_killed_rank_stops_the_other_and_the_run_resumes_exactly(tmp_path, shared_runs):
    settings = THREE_ITERATIONS
    full = shared_runs.get("three-iterations", settings)

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
    assert_all_succeeded(resumed)
    assert [stable(m) for m in metrics(run_dir)] == [stable(m) for m in metrics(full)]
    a, b = adapter(run_dir, 3), adapter(full, 3)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_env_workers_in_a_two_process_run_give_the_in_process_run(tmp_path, shared_runs):
    """Each rank starts its own env worker pool; the run equals the one whose envs step in the
    training processes (same metrics, same adapter), compared over its first two iterations."""
    inline = shared_runs.get("three-iterations", THREE_ITERATIONS)
    settings = [*THREE_ITERATIONS, "run.iterations=2"]
    pooled = finish(launch_ranks([*cli_args(settings), "--set", "env.workers=1", "--set", "env.worker_backend=process",
                                  "--set", "run.name=pooled", "--output-dir", str(tmp_path)]))
    assert_all_succeeded(pooled)
    assert [stable(m) for m in metrics(tmp_path / "pooled")] == [stable(m) for m in metrics(inline)][:2]
    assert all(m["processes"] == 2 for m in metrics(tmp_path / "pooled"))
    a, b = adapter(tmp_path / "pooled", 2), adapter(inline, 2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# FSDP: the word task with an expert and a held-out split, so the warm start and the three
# evaluations run sharded too; 3 tasks on 2 ranks (2 groups and 1) and generation batches of 2,
# so the ranks make different numbers of generate calls and micro-batches (the lockstep is exercised)
FSDP_SETTINGS = [s for s in SETTINGS if not s.startswith(("env.factory", "run.evaluate_after", "warmup.enabled"))] + [
    "env.id=WordPickSplit-Rubric-v0", "algorithm.tasks_per_iteration=3", "generation.batch_size=2",
    "warmup.steps=3", "warmup.games=2", "run.iterations=2"]
SHARDING_FLAGS = ("fsdp", "deepspeed_zero")


def approx_metrics(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x, y = stable(x), stable(y)
        assert set(x) == set(y)
        for key, value in x.items():
            if key in SHARDING_FLAGS or key == "time_s":
                continue
            assert y[key] == (pytest.approx(value, rel=1e-5, abs=1e-7) if isinstance(value, float) else value), key


def assert_adapters_close(a_dir: Path, b_dir: Path, iteration: int = 2) -> None:
    """Within float noise of another reduction order, as AdamW turns it into weights: it divides
    each step by the root of the squared gradients, so where a gradient is near zero (the KL
    term's, while the policy is still its reference) that noise becomes update noise. Measured
    (lr 0.01, 4 steps) at most 1.6e-6 of 14,336 weights under ZeRO-3, 1.1e-6 under ZeRO-2; a
    wrong reference, shard or step would be off by far more (one step moves a weight ~1e-2)."""
    a, b = adapter(a_dir, iteration), adapter(b_dir, iteration)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=4e-6)


def resume_and_compare(cut: Path, full: Path) -> None:
    """Resume the stopped run ``cut``: it must end with exactly ``full``'s metrics and adapter."""
    resumed = finish(launch_ranks(["--resume", str(cut), "--quiet"]))
    assert_all_succeeded(resumed)
    timeless = [[{k: v for k, v in stable(m).items() if k != "time_s"} for m in metrics(run)] for run in (cut, full)]
    assert timeless[0] == timeless[1]
    a, b = adapter(cut, 2), adapter(full, 2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def replicated_run(shared_runs: SharedRuns) -> Path:
    """The FSDP_SETTINGS run on 2 replicated ranks (what every sharded run must equal), started
    by ``accelerate launch`` with the shipped configs/accelerate/ddp.yaml."""
    return shared_runs.get("replicated", FSDP_SETTINGS, accelerate="ddp")


# the shardings a shipped accelerate config asks for: those runs are launched through it, as a
# user launches them; the launcher then names the sharding (no run setting)
SHIPPED_CONFIG = {"run.fsdp=true": "fsdp", "run.deepspeed_zero=2": "deepspeed_zero2",
                  "run.deepspeed_zero=3": "deepspeed_zero3"}


def sharded_run(shared_runs: SharedRuns, setting: str) -> tuple[Path, Path]:
    """The FSDP_SETTINGS run with one sharding, recording each rank's samples: (run, record).
    The sharding comes from the shipped accelerate config for it (SHIPPED_CONFIG), else from
    ``setting`` (ZeRO-1); a resumed run that sets ``setting`` instead must still match it."""
    record = shared_runs.root / f"record-{setting.replace('=', '-')}"
    record.mkdir(exist_ok=True)
    name = setting.split(".", 1)[1].replace("=", "-").replace("_", "-")
    config = SHIPPED_CONFIG.get(setting)
    settings = FSDP_SETTINGS if config else [*FSDP_SETTINGS, setting]
    return shared_runs.get(name, settings, accelerate=config, RUBRICGYM_TEST_RECORD=str(record)), record


def rl_lines(run_dir: Path) -> list[dict]:
    """The RL iterations' metrics lines (the warm start's lines carry no process count)."""
    return [m for m in metrics(run_dir) if "processes" in m]


@pytest.mark.slow
def test_fsdp_trains_like_replicated_processes(shared_runs):
    """FSDP (configs/accelerate/fsdp.yaml) shards the base model and the adapter over 2 ranks:
    warm start, evaluations and RL give the replicated (DDP) run's metrics and adapter, within
    float tolerance."""
    fsdp_run, record = sharded_run(shared_runs, "run.fsdp=true")
    replicated_dir = replicated_run(shared_runs)
    sharded, replicated = metrics(fsdp_run), metrics(replicated_dir)
    assert [m["fsdp"] for m in sharded if "fsdp" in m] == [1, 1] and [m["fsdp"] for m in replicated if "fsdp" in m] == [0, 0]
    approx_metrics(sharded, replicated)
    evaluations = [json.loads((run / "evaluations.json").read_text()) for run in (fsdp_run, replicated_dir)]
    assert set(evaluations[0]) == {"before", "after_warmup", "after"}
    assert [[t["success"] for t in e["after"]["tasks"]] for e in evaluations] == [
        [t["success"] for t in evaluations[1]["after"]["tasks"]]] * 2
    assert_adapters_close(fsdp_run, replicated_dir)
    # the ranks really did different amounts of work: 2 groups against 1
    shares = [load_samples(record / f"samples-rank{r}-iter1.json") for r in (0, 1)]
    assert len(shares[0]) == 2 * len(shares[1]) > 0


@pytest.mark.slow
def test_an_fsdp_run_resumes_exactly(tmp_path, shared_runs):
    full, _ = sharded_run(shared_runs, "run.fsdp=true")
    stopped = finish(launch_ranks([*cli_args(FSDP_SETTINGS), "--set", "run.fsdp=true", "--set", "run.name=cut",
                                   "--output-dir", str(tmp_path), "--stop-after", "1"]))
    assert_all_succeeded(stopped)
    resume_and_compare(tmp_path / "cut", full)


@pytest.mark.slow
def test_deepspeed_zero_trains_like_replicated_processes(shared_runs):
    """DeepSpeed ZeRO at stages 1 (run.deepspeed_zero=1), 2 and 3 (the shipped accelerate configs):
    optimizer state, gradients, weights partitioned; the warm start, evaluations and RL give the
    replicated run's metrics and adapter, within float tolerance, while the ranks roll out 2
    groups and 1."""
    replicated_dir = replicated_run(shared_runs)
    replicated = metrics(replicated_dir)
    for stage in (1, 2, 3):
        zero_run, record = sharded_run(shared_runs, f"run.deepspeed_zero={stage}")
        zero = metrics(zero_run)
        assert [m["deepspeed_zero"] for m in zero if "processes" in m] == [stage, stage]
        approx_metrics(zero, replicated)
        assert_adapters_close(zero_run, replicated_dir)
        shares = [load_samples(record / f"samples-rank{r}-iter1.json") for r in (0, 1)]
        assert len(shares[0]) == 2 * len(shares[1]) > 0


@pytest.mark.slow
@pytest.mark.parametrize("stage, stop", [(2, "stop-after"), (3, "kill")])
def test_a_deepspeed_run_resumes_exactly(tmp_path, shared_runs, stage, stop):
    """The checkpoint holds whole tensors gathered from the engine's partitions; a run stopped
    after iteration 1 (or whose rank 1 is SIGKILLed as iteration 2 starts: rank 0 stops at the
    next collective) resumes into a new engine and continues as if never stopped."""
    common = [*cli_args(FSDP_SETTINGS), "--set", f"run.deepspeed_zero={stage}", "--set",
              "run.collective_timeout_s=30", "--output-dir", str(tmp_path)]
    full, _ = sharded_run(shared_runs, f"run.deepspeed_zero={stage}")
    if stop == "kill":
        (code0, err0), (code1, _) = finish(launch_ranks([*common, "--set", "run.name=cut"], RUBRICGYM_TEST_KILL="1:2"))
        assert (code0, code1) == (3, -signal.SIGKILL), err0[-3000:]
        assert "another rank died or did not answer" in err0 and "--resume" in err0
    else:
        stopped = finish(launch_ranks([*common, "--set", "run.name=cut", "--stop-after", "1"]))
        assert_all_succeeded(stopped)
    saved = load_file(str(tmp_path / "cut" / "checkpoint-000001" / TENSORS_FILE))
    moments = [k for k in saved if k.startswith("optimizer/") and k.endswith(("/exp_avg", "/exp_avg_sq"))]
    assert moments and all(saved[k].abs().sum() > 0 for k in moments), "the engine's AdamW moments were not gathered"
    resume_and_compare(tmp_path / "cut", full)


@pytest.mark.parametrize("setting", ["run.fsdp=true", "run.deepspeed_zero=3"])
def test_sharding_refuses_what_it_cannot_keep_in_step(tmp_path, setting):
    """A generation server would need the sharded adapter exported; refused before the model loads."""
    out = finish(launch_ranks([*cli_args(SETTINGS), "--set", setting, "--set", "generation.backend=openai",
                               "--output-dir", str(tmp_path)]))
    assert [code for code, _ in out] == [2, 2]
    assert all(f"{setting.split('=')[0]} with generation.backend='openai'" in err for _, err in out)


def test_rank_metrics_merge_as_count_weighted_means():
    parts = [{"metrics": {"success_rate": 1.0, "action_parsed_rate": 0.5, "rollout_errors": 1.0},
              "counts": {"rollouts": 3, "steps": 2, "trca_steps": 0, "compared_groups": 1}},
             {"metrics": {"success_rate": 0.0, "action_parsed_rate": 0.0, "rollout_errors": 2.0},
              "counts": {"rollouts": 1, "steps": 6, "trca_steps": 0, "compared_groups": 1}}]
    merged = merge_rank_metrics(parts)
    assert merged == {"success_rate": 0.75, "action_parsed_rate": 0.125, "rollout_errors": 3.0}


@pytest.mark.parametrize("stage, synced", [(1, False), (2, False), (3, True)])
def test_only_zero_3_keeps_generation_in_step(stage, synced):
    """ZeRO-1/2 ranks hold the whole weights: each generates alone (no collective per token);
    ZeRO-3 gathers weights in every forward, so its generate calls and token loops agree."""
    strategy = ZeroStrategy(Ranks(rank=0, world_size=2), ParallelPlan(engine="zero", zero_stage=stage))
    assert strategy.lockstep.synced is synced
    assert isinstance(strategy.lockstep, AgreedLockstep) is synced


def test_one_process_ranks_are_the_identity():
    ranks = Ranks()
    assert not ranks.distributed and ranks.is_main and ranks.share(3) == [0, 1, 2]
    assert ranks.sum([1, 2.5]) == [1.0, 2.5] and ranks.gather_json({"a": 1}) == [{"a": 1}]
    assert Ranks(rank=1, world_size=2).share(5) == [1, 3]


def train_in_process(tmp_path, monkeypatch, capsys, **launch_env: str) -> tuple[int, str]:
    """``rubricgym train`` with the launcher's variables set, in this process (a refusal that
    comes before anything loads needs no child process); (exit code, stderr)."""
    for name, value in launch_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(ROOT / "tests"))  # the word env's module, as child_env's PYTHONPATH
    code = cli_main(["train", *cli_args(SETTINGS), "--output-dir", str(tmp_path)])
    return code, capsys.readouterr().err


def test_a_megatron_accelerate_config_is_refused_before_anything_loads(tmp_path, monkeypatch, capsys):
    """accelerate marks Megatron-LM launches with this variable; the trainer does not drive that
    engine, so it stops with a clear error rather than silently sharding nothing."""
    code, err = train_in_process(tmp_path, monkeypatch, capsys, ACCELERATE_USE_MEGATRON_LM="true")
    assert code == 2, err[-3000:]
    assert "cannot start: the accelerate config asks for Megatron-LM" in err
    assert "configs/accelerate/ddp.yaml" in err and not list(tmp_path.iterdir())


@pytest.mark.parametrize("extra, message", [
    ({"ACCELERATE_DEEPSPEED_CONFIG_FILE": "ds.json"}, "asks for a DeepSpeed config file"),
    ({"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE": "cpu"}, "asks for offloading the optimizer state"),
    ({"ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE": "nvme"}, "asks for offloading the parameters"),
    ({"ACCELERATE_DEEPSPEED_ZERO_STAGE": "0"}, "asks for ZeRO stage '0'"),
])
def test_deepspeed_settings_the_trainer_does_not_apply_are_refused(tmp_path, monkeypatch, capsys, extra, message):
    code, err = train_in_process(tmp_path, monkeypatch, capsys, ACCELERATE_USE_DEEPSPEED="true", **extra)
    assert code == 2, err[-3000:]
    assert message in err and not list(tmp_path.iterdir())


def test_the_launch_environment_names_the_sharding():
    assert launch_request({}) == LaunchRequest()
    assert launch_request({"ACCELERATE_USE_FSDP": "true"}) == LaunchRequest(fsdp=True)
    assert launch_request({"ACCELERATE_USE_DEEPSPEED": "true"}) == LaunchRequest(zero_stage=2)  # accelerate's default
    assert launch_request({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
                           "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE": "none"}) == LaunchRequest(zero_stage=3)
    with pytest.raises(ValueError, match="choose one"):
        RunSettings(fsdp=True, deepspeed_zero=2)


def test_the_run_config_and_the_launcher_together_choose_one_sharding():
    config = load_config(None, ["run.deepspeed_zero=3"])
    assert plan_for(config.run, {}) == ParallelPlan(engine="zero", zero_stage=3)
    assert plan_for(load_config(None, []).run, {"ACCELERATE_USE_DEEPSPEED": "true"}) == ParallelPlan("zero", 2)
    fsdp_launch = {"ACCELERATE_USE_FSDP": "true"}
    with pytest.raises(ValueError, match="choose one"):
        plan_for(config.run, fsdp_launch)
    self_judge = load_config(None, ["judge.self_judge=true"])
    fsdp = plan_for(self_judge.run, fsdp_launch)
    with pytest.raises(NotImplementedError, match="judge.self_judge"):
        FsdpStrategy(Ranks(rank=0, world_size=2), fsdp).check_run("hf", self_judge=True)
    # one process: nothing to shard, nothing refused; the model stays whole
    alone = choose_strategy(self_judge.run, cuda=False, generation_backend="hf", self_judge=True, environ=fsdp_launch)
    assert alone.label == "replicated" and not alone.ranks.distributed


def test_deepspeed_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # what an environment without it imports
    with pytest.raises(ImportError, match=r"pip install 'rubricgym\[deepspeed\]'"):
        require_deepspeed(device_is_cpu=True)


@pytest.mark.slow
def test_accelerate_launch_with_the_shipped_fsdp_config_shards_the_model(shared_runs):
    run, _ = sharded_run(shared_runs, "run.fsdp=true")  # launched through configs/accelerate/fsdp.yaml
    logged = rl_lines(run)
    assert [(m["processes"], m["fsdp"]) for m in logged] == [(2, 1)] * 2 and all(m["trained_samples"] > 0 for m in logged)
    assert "2 processes, FSDP" in shared_runs.stdout[run]


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_accelerate_launch_with_a_shipped_deepspeed_config_trains_through_zero(shared_runs, stage):
    run, _ = sharded_run(shared_runs, f"run.deepspeed_zero={stage}")  # through deepspeed_zero{stage}.yaml
    logged = rl_lines(run)
    assert [(m["processes"], m["deepspeed_zero"]) for m in logged] == [(2, stage)] * 2
    assert all(m["trained_samples"] > 0 for m in logged)
    assert f"2 processes, DeepSpeed ZeRO-{stage}" in shared_runs.stdout[run]


@pytest.mark.slow
def test_accelerate_launch_with_the_shipped_config(shared_runs):
    run = replicated_run(shared_runs)  # launched through configs/accelerate/ddp.yaml
    logged = rl_lines(run)
    assert [m["processes"] for m in logged] == [2, 2] and all(m["trained_samples"] > 0 for m in logged)
    assert shared_runs.stdout[run].count("rubricgym train: tiny on") == 1  # rank 0 speaks for the run


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


def test_this_module_runs_in_the_several_process_group(request):
    """Under ``make test`` (xdist, --dist loadgroup) these tests run one at a time on one worker;
    xdist marks that by suffixing the node id (pytest 9 stopped honouring the suffix: pinned < 9)."""
    if request.config.getvalue("dist") != "loadgroup":
        return  # a plain run (one process): nothing is grouped, nothing to check
    assert request.node.nodeid.endswith("@several-processes"), request.node.nodeid
