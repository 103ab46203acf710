"""Env workers (``env.workers``): rollouts stepped in Ray actors or a local process pool give
the same trajectories as in-process envs for the same seeds and responses; a worker killed
mid-episode ends its rollouts as labelled engine failures and is replaced, and the run goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from requirements_guard import need
from rubricgym.prompts import PromptSettings
from rubricgym.trainers.config import EnvSettings, load_config
from rubricgym.trainers.env_workers import WORKER_DIED, WorkerEnvSlots, build_collector
from rubricgym.trainers.rollout import LocalEnvSlots, RolloutCollector, RolloutTimings, make_env_factory

from rubricgym.models import build_tiny_model

WORD_FACTORY = "word"


class TurnScript:
    """Scripted responses: rollout i at turn t answers ``texts[(3 t + i) % n]`` (real tokenizer),
    so the same call sequence gives the same responses whatever hosts the envs. ``on_turn``
    runs before a turn's answers are returned (used to kill a worker mid-episode)."""

    def __init__(self, tok, texts, on_turn=None):
        self.tok, self.texts, self.turn, self.on_turn, self.calls = tok, list(texts), 0, on_turn, []

    def generate(self, prompts):
        self.calls.append(len(prompts))
        if self.on_turn is not None:
            self.on_turn(self.turn)
        out = [self.tok(self.texts[(3 * self.turn + i) % len(self.texts)], add_special_tokens=False)["input_ids"]
               + [self.tok.eos_token_id] for i in range(len(prompts))]
        self.turn += 1
        return out

    def sync_weights(self, model, iteration):
        pass


def record(rollout):
    """Everything a rollout carries into training, as plain data."""
    return {
        "task": rollout.task_id, "seed": rollout.seed, "group": rollout.group, "member": rollout.member,
        "error": rollout.error,
        "steps": [(s.prompt_ids, s.response_ids, s.response_text, s.reasoning_tokens, s.action_tokens, s.reward,
                   s.env_reward, s.context_key, s.info) for s in rollout.steps],
        "trajectory": rollout.trajectory.model_dump(mode="json") if rollout.trajectory is not None else None,
    }


def collect(collector, tok, texts, tasks, group_size, on_turn=None):
    policy = TurnScript(tok, texts, on_turn)
    groups = collector.collect(policy, tasks, group_size=group_size, timings=RolloutTimings())
    return [record(r) for g in groups for r in g], policy


WORD_TEXTS = ["<think>a</think><action>apple</action>", "<action>bread</action>", "nonsense",
              "<action>drum</action>", "<action>chair</action>", "<action>flute</action>"]


def word_settings(**kw):
    return EnvSettings(factory=WORD_FACTORY, max_steps=3, **kw)


def test_an_env_worker_imports_no_model_stack():
    """A spawned worker imports env_workers (its entry point) and the env: torch, transformers
    and peft would cost each worker seconds of CPU and hundreds of MB for nothing."""
    code = ("import sys, rubricgym.trainers.env_workers\n"
            "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # spawned workers import the envs: seconds each on a shared CPU
def test_process_pool_gives_the_in_process_trajectories_on_the_word_env():
    _, tok = build_tiny_model(0)
    settings = word_settings(workers=2, worker_backend="process")
    tasks = [("pick-0", 11), ("pick-1", 12)]
    local = RolloutCollector(make_env_factory(settings), tok, PromptSettings(), max_steps=3)
    expected, local_policy = collect(local, tok, WORD_TEXTS, tasks, 3)
    local.close()
    remote = build_collector(settings, None, tok, PromptSettings(), 3)
    assert isinstance(remote.slots, WorkerEnvSlots) and remote.slots.pool.backend == "process"
    try:
        got, remote_policy = collect(remote, tok, WORD_TEXTS, tasks, 3)
        assert remote.slots.summary.task_ids() == ["pick-0", "pick-1"]
        assert remote.slots.summary.grammar == make_env_factory(settings)().unwrapped.adapter.grammar  # the prompt's format
        pids = {remote.slots.pool.request(i, "pid")["pid"] for i in range(2)}
    finally:
        remote.close()
    assert len(pids) == 2 and os.getpid() not in pids  # two separate worker processes
    assert remote_policy.calls == local_policy.calls and len(local_policy.calls) >= 2
    assert got == expected
    assert any(r["steps"] for r in got) and any(r["trajectory"]["outcome"]["success"] for r in got)


@pytest.mark.slow  # spawned workers import the envs: seconds each on a shared CPU
def test_a_killed_process_worker_ends_its_rollouts_labelled_and_is_replaced():
    _, tok = build_tiny_model(0)
    remote = build_collector(word_settings(workers=2, worker_backend="process"), None, tok, PromptSettings(), 3)
    pool = remote.slots.pool
    victim = pool.request(0, "pid")["pid"]

    def kill_worker_0(turn):
        if turn == 1:
            os.kill(victim, signal.SIGKILL)

    try:
        texts = ["<action>bread</action>"]  # always wrong: every rollout runs all 3 turns
        got, _ = collect(remote, tok, texts, [("pick-0", 1)], 4, on_turn=kill_worker_0)
        check_killed_worker_outcome(got, pool)
        again, _ = collect(remote, tok, texts, [("pick-0", 1)], 4)  # the run goes on, replacement in place
        assert all(r["error"] is None and len(r["steps"]) == 3 for r in again)
        assert victim not in {pool.request(i, "pid")["pid"] for i in range(2)}
    finally:
        remote.close()


def check_killed_worker_outcome(got, pool):
    # slots 0 and 2 live in worker 0 (killed before turn 2 was stepped); 1 and 3 in worker 1
    dead, alive = [got[0], got[2]], [got[1], got[3]]
    for r in dead:
        assert r["error"].startswith(WORKER_DIED)
        assert len(r["steps"]) == 1  # turn 1 was stepped; turn 2's response never was
        last = r["trajectory"]["transitions"][-1]
        assert len(r["trajectory"]["transitions"]) == 2
        assert last["truncated"] and last["error"].startswith(WORKER_DIED) and last["step"] == 1
    for r in alive:
        assert r["error"] is None and len(r["steps"]) == 3
    assert pool.replaced == 1 and pool.started == 3


def test_workers_need_a_config_env_and_valid_settings():
    _, tok = build_tiny_model(0)
    with pytest.raises(ValueError, match="env.workers needs env.id or env.factory"):
        build_collector(word_settings(workers=2), lambda: None, tok, PromptSettings(), 3, env_fn_injected=True)
    local = build_collector(word_settings(), make_env_factory(word_settings()), tok, PromptSettings(), 3)
    assert isinstance(local.slots, LocalEnvSlots)
    with pytest.raises(ValueError, match="worker_backend"):
        load_config(None, ["env.worker_backend=threads"])
    with pytest.raises(ValueError, match="workers"):
        load_config(None, ["env.workers=-1"])


@pytest.mark.slow
def test_trainer_runs_an_iteration_with_process_workers(tmp_path):
    from rubricgym.trainers.trainer import Trainer

    config = load_config(None, [
        "model.name=tiny", "model.device=cpu", f"env.factory={WORD_FACTORY}", "env.max_steps=2",
        "env.workers=2", "env.worker_backend=process", "algorithm.advantage=grpo", "algorithm.group_size=2",
        "algorithm.tasks_per_iteration=2", "generation.max_new_tokens=8", "run.iterations=1", "run.progress=false",
        "run.evaluate_after=false", "run.tensorboard=false", "warmup.enabled=false",
        f"run.output_dir={tmp_path}", "run.name=w",
    ])
    trainer = Trainer(config)
    try:
        assert isinstance(trainer.collector.slots, WorkerEnvSlots)
        metrics = trainer.train_iteration()
    finally:
        trainer.close()
    assert metrics["rollout_errors"] == 0 and metrics["episode_steps"] >= 1
    assert (tmp_path / "w" / "trajectories" / "iter-000001.jsonl").is_file()


# ---- ALFWorld on its real engine, through Ray actors and through the process pool ----------------
ALF_TEXTS = ["<think>look first</think><action>look</action>", "<action>inventory</action>", "nonsense",
             "<action>go to desk 1</action>", "<action>open drawer 1</action>", "<action>go to shelf 1</action>"]


@pytest.fixture(scope="module")
def ray_local():
    ray = need("ray", "pip install 'rubricgym[ray]'")
    from rubricgym.trainers.env_workers import ensure_ray

    ensure_ray(None, num_cpus=2)
    yield ray
    ray.shutdown()


class InProcessRuns:
    """The in-process collection each worker backend must reproduce, collected once per module
    (both backends compare against the same rollouts; the pool is not part of what is run)."""

    def __init__(self):
        self.runs: dict[tuple, list] = {}

    def get(self, settings: EnvSettings, tok, texts: list[str], tasks: list, group: int, max_steps: int) -> list:
        key = (settings.id, tuple(texts), tuple(tasks), group, max_steps)
        if key not in self.runs:
            local = RolloutCollector(make_env_factory(settings), tok, PromptSettings(), max_steps=max_steps)
            try:
                self.runs[key], _ = collect(local, tok, texts, tasks, group)
            finally:
                local.close()
        return self.runs[key]


@pytest.fixture(scope="module")
def in_process_runs() -> InProcessRuns:
    return InProcessRuns()


def alf_settings(backend):
    return EnvSettings(id="ALFWorld-Rubric-v0", max_steps=3, workers=2, worker_backend=backend)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("backend", ["ray", "process"])
def test_alfworld_with_two_workers_gives_the_in_process_trajectories(backend, request, in_process_runs):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    if backend == "ray":
        request.getfixturevalue("ray_local")
    _, tok = build_tiny_model(0)
    settings = alf_settings(backend)
    remote = build_collector(settings, None, tok, PromptSettings(), 3)
    try:
        assert remote.slots.pool.backend == backend
        names = remote.slots.summary.task_ids()
        tasks = [(names[0], 5), (names[1], 6)]
        got, _ = collect(remote, tok, ALF_TEXTS, tasks, 2)
    finally:
        remote.close()
    expected = in_process_runs.get(settings, tok, ALF_TEXTS, tasks, 2, max_steps=3)
    assert got == expected
    assert all(r["error"] is None for r in got) and sum(len(r["steps"]) for r in got) >= 8
    assert all("trca" in s[8]["rubric"] for r in got for s in r["steps"])  # the reward records came along


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("backend", ["ray", "process"])
def test_alfworld_worker_killed_mid_episode_is_labelled_and_replaced(backend, request):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    if backend == "ray":
        request.getfixturevalue("ray_local")
    _, tok = build_tiny_model(0)
    remote = build_collector(alf_settings(backend), None, tok, PromptSettings(), 3)
    pool = remote.slots.pool
    try:
        victim = pool.request(0, "pid")["pid"]

        def kill_worker_0(turn):
            if turn == 1:
                os.kill(victim, signal.SIGKILL)

        task = remote.slots.summary.task_ids()[0]
        texts = ["<action>inventory</action>"]  # never ends an episode: all rollouts run 3 turns
        got, _ = collect(remote, tok, texts, [(task, 3)], 4, on_turn=kill_worker_0)
        check_killed_worker_outcome(got, pool)
        again, _ = collect(remote, tok, texts, [(task, 3)], 4)
        assert all(r["error"] is None and len(r["steps"]) == 3 for r in again)
    finally:
        remote.close()


# ---- AppWorld: one AppWorld server per env, so one per rollout a worker hosts ----------------------
APPWORLD_TEXTS = ["<think>look around</think><action>print(apis.api_docs.show_app_descriptions())</action>",
                  "<action>print(1 + 1)</action>", "no action here",
                  "<action>print(apis.supervisor.show_profile())</action>"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("backend", ["ray", "process"])
def test_appworld_with_two_workers_gives_the_in_process_trajectories(backend, request, in_process_runs):
    if backend == "ray":
        request.getfixturevalue("ray_local")
    _, tok = build_tiny_model(0)
    settings = EnvSettings(id="AppWorld-Rubric-v0", max_steps=2, workers=2, worker_backend=backend)
    remote = build_collector(settings, None, tok, PromptSettings(), 2)
    try:
        names = remote.slots.summary.task_ids()
        tasks = [(names[0], 5), (names[1], 6)]
        got, _ = collect(remote, tok, APPWORLD_TEXTS, tasks, 1)
    finally:
        remote.close()
    expected = in_process_runs.get(settings, tok, APPWORLD_TEXTS, tasks, 1, max_steps=2)
    assert got == expected
    assert all(r["error"] is None for r in got) and sum(len(r["steps"]) for r in got) == 4


@pytest.mark.slow
def test_an_env_that_cannot_be_built_in_a_worker_is_a_clear_error():
    _, tok = build_tiny_model(0)
    settings = EnvSettings(factory="word", kwargs={"no_such_argument": 1}, workers=1,
                           worker_backend="process")
    with pytest.raises(RuntimeError, match=r"could not build the env \(word\).*no_such_argument"):
        build_collector(settings, None, tok, PromptSettings(), 2)
