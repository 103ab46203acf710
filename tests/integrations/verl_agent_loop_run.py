"""Run by tests/integrations/test_verl_agent_loop.py with the verl venv's python (.venvs/verl): real
ALFWorld episodes by a real SmolLM2 through rubricgym's verl agent loop, driven by verl's own
``AgentLoopWorker``, then verl's own ``compute_advantage`` with rubricgym's estimators.

    .venvs/verl/bin/python tests/integrations/verl_agent_loop_run.py MODEL_DIR WORK_DIR

verl 0.9.1's agent loops reach a model only through a server manager's
``generate(request_id, prompt_ids=, sampling_params=) -> TokenOutput``; its servers are vLLM,
SGLang and TensorRT-LLM, none of which runs here (CPU). So ``TransformersServer`` below
implements that interface on SmolLM2 with transformers in this process (sampling, token ids in
and out, the sampled tokens' log-probs, as vLLM's server returns them). Everything else is
verl's or rubricgym's own code: the parquet rows from ``write_verl_dataset`` are read by verl's
``RLHFDataset`` and collated as its trainer does (``uid``, ``_get_gen_batch``, ``repeat(n,
interleave=True)``); the agent loop comes from the yaml ``write_agent_loop_config`` wrote, loaded
by verl's ``AgentLoopWorker`` (``agent_loop_config_path``), which runs it and pads the outputs
into a ``DataProto``; that batch, joined as the trainer joins it, goes through verl's
``compute_advantage(..., adv_estimator="rubricgym_<name>")``. Prints one JSON line of results.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

started = time.perf_counter()
from hydra import compose, initialize_config_dir  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, _agent_loop_registry  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

import rubricgym  # noqa: E402,F401  (registers the env ids)
from rubricgym.integrations.episodes import Episode, completion_advantages  # noqa: E402
from rubricgym.integrations.verl import EPISODE_FIELD, verl_name  # noqa: E402
from rubricgym.integrations.verl_agent_loop import (  # noqa: E402
    _POOL,
    AGENT_NAME,
    close_envs,
    write_agent_loop_config,
    write_verl_dataset,
)
from rubricgym.registration import expert_of, task_ids  # noqa: E402

import_s = time.perf_counter() - started
ENV_ID = "ALFWorld-Rubric-v0"
N = 2  # rollouts per row (verl's rollout.n)
SEED, REPLAY_SEED = 5, 2
MAX_STEPS, MAX_NEW_TOKENS, RESPONSE_LENGTH = 2, 16, 320
REPLAY_RESPONSE_LENGTH = 4096
NAMES = ["trca", "gigpo", "grpo"]
CONCURRENT_ROWS = 6  # x N rollouts in flight at once in one worker


class TransformersServer:
    """verl's server-manager interface (``generate``, as ``LLMServerClient`` has it) on a
    transformers model in this process: the one model server this CPU machine can give verl's
    agent loop. Samples with verl's sampling params, stops at EOS (kept, as vLLM keeps it) or
    ``max_tokens``, and returns the sampled tokens' log-probs (raw logits, as vLLM's default)
    when ``logprobs`` is asked for. Records every call."""

    def __init__(self, model_dir: str):
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> TokenOutput:
        temperature = float(sampling_params.get("temperature", 1.0))
        top_k = int(sampling_params.get("top_k", -1))
        with torch.no_grad():
            out = self.model.generate(
                input_ids=torch.tensor([prompt_ids]), attention_mask=torch.ones((1, len(prompt_ids)), dtype=torch.long),
                max_new_tokens=int(sampling_params["max_tokens"]), do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None, top_p=float(sampling_params.get("top_p", 1.0)),
                top_k=top_k if top_k > 0 else 0, output_logits=True, return_dict_in_generate=True,
                eos_token_id=self.tokenizer.eos_token_id, pad_token_id=self.tokenizer.eos_token_id)
        ids = out.sequences[0, len(prompt_ids):].tolist()
        log_probs = None
        if sampling_params.get("logprobs"):
            logits = torch.stack(out.logits, dim=1)[0, : len(ids)].float()
            log_probs = torch.log_softmax(logits, dim=-1)[torch.arange(len(ids)), torch.tensor(ids)].tolist()
        self.calls.append({"request_id": request_id, "prompt_length": len(prompt_ids), "new": len(ids),
                           "max_tokens": int(sampling_params["max_tokens"])})
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason="completed")


class ReplayServer:
    """The same interface replaying given replies (one script per episode, in the order the
    episodes first call): SmolLM2 fails every step here, so the real-model run's credit is
    zero; this group (the expert's plan against wandering) gives credit worth comparing,
    through the same agent loop, worker, padding and estimators. It stands in for the model
    only in this check, as the scripted replies of verl_run.py do."""

    def __init__(self, tokenizer: Any, scripts: Sequence[Sequence[str]]):
        self.ids = [[list(tokenizer(t, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
                     for t in script] for script in scripts]
        self.turns: dict[str, int] = {}
        self.order: list[str] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> TokenOutput:
        if request_id not in self.turns:
            self.order.append(request_id)
            self.turns[request_id] = 0
        turn = self.turns[request_id]
        self.turns[request_id] += 1
        return TokenOutput(token_ids=self.ids[self.order.index(request_id)][turn], stop_reason="completed")


class InterleavingReplayServer(ReplayServer):
    """``ReplayServer`` that yields to the event loop on every call, as a real server's network
    wait does, so the worker's episodes interleave turn by turn; it records the call order."""

    def __init__(self, tokenizer: Any, scripts: Sequence[Sequence[str]]):
        super().__init__(tokenizer, scripts)
        self.calls: list[str] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> TokenOutput:
        self.calls.append(request_id)
        await asyncio.sleep(0)
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kwargs)


def pooled_envs() -> int:
    return sum(len(rollouts) for rollouts in _POOL.values())


def concurrency(model_dir: str, work: Path, tokenizer: Any, rows: int) -> dict[str, Any]:
    """``rows`` rows x N rollouts through one worker at once (the expert's plan against wandering
    per row), their turns interleaved: no episode may see another's env (each replays alike in a
    fresh env), the env pool grows to the number of episodes and is reused by a second batch."""
    tasks = task_ids(ENV_ID)[:rows]
    seeds = [100 + k for k in range(rows)]
    parquet = write_verl_dataset(work / "many.parquet", ENV_ID, seeds, tasks)
    pairs = [expert_scripts(t, s) for t, s in zip(tasks, seeds, strict=True)]
    longest = max(len(w) for _, w in pairs)  # every wandering script runs to the step budget
    scripts = [(plan, (wander * longest)[:longest]) for plan, wander in pairs]
    loops = write_agent_loop_config(work / "many_loops.yaml", max_steps=longest, max_new_tokens=MAX_NEW_TOKENS,
                                    prompt={"format_example": True})
    config = verl_config(model_dir, work, loops, response_length=REPLAY_RESPONSE_LENGTH)
    order = [script for pair in scripts for script in pair]  # rows repeated interleaved: row k's two rollouts
    close_envs()
    out: dict[str, Any] = {"episodes": rows * N}
    for round_ in ("first", "second"):
        server = InterleavingReplayServer(tokenizer, order)
        batch = play(AgentLoopWorker(config, server), trainer_batch(config, tokenizer, parquet))
        episodes = [Episode.from_dict(json.loads(e)) for e in batch.non_tensor_batch[EPISODE_FIELD]]
        extra = batch.non_tensor_batch["extra_info"]
        calls = server.calls
        # a request's calls are contiguous when its first and last call enclose no other request's
        last = {r: k for k, r in enumerate(calls)}
        contiguous = all(last[r] - calls.index(r) + 1 == calls.count(r) for r in last)
        mismatched = []
        for i, episode in enumerate(episodes):
            replies = [tokenizer.decode(batch.batch["responses"][i, s.response[0]: s.response[1]].tolist(),
                                        skip_special_tokens=True) for s in episode.steps]
            again = replay(episode, replies, extra[i]["task_id"], max_steps=longest)
            if (again["rewards"] != [s.env_reward for s in episode.steps] or episode.task_id != extra[i]["task_id"]
                    or episode.seed != extra[i]["seed"] or replies != list(order[i][: len(replies)])):
                mismatched.append(i)
        out[round_] = {"mismatched": mismatched, "interleaved": not contiguous, "pooled_envs": pooled_envs(),
                       "successes": [e.success for e in episodes], "requests": len(set(calls)),
                       "credit_equal": all(r["equal"] for r in credit(batch).values())}
    close_envs()
    return out


def expert_scripts(task_id: str, seed: int) -> tuple[list[str], list[str]]:
    """The expert's plan for the task (it wins) and a wandering script of one more step (it does not)."""
    env = gym.make(ENV_ID)
    try:
        env.reset(seed=seed, options={"task_id": task_id})
        found = expert_of(env)
        assert found is not None, f"{ENV_ID} has no expert"
        expert, adapter = found
        plan = [adapter.grammar.render(a) for a in expert(adapter)]
        wander = [adapter.grammar.render(a) for a in (["look", "inventory"] * len(plan))[: len(plan) + 1]]
        return plan, wander
    finally:
        env.close()


def verl_config(model_dir: str, work: Path, agent_loops: Path, prompt_length: int = 1024,
                response_length: int = RESPONSE_LENGTH) -> Any:
    """verl's own trainer config (ppo_trainer.yaml) with this run's overrides."""
    import verl  # for its config folder

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=[
            f"actor_rollout_ref.model.path={model_dir}",
            "actor_rollout_ref.rollout.name=vllm",  # required by the schema; no vLLM server is started here
            f"actor_rollout_ref.rollout.n={N}",
            f"actor_rollout_ref.rollout.prompt_length={prompt_length}",
            f"actor_rollout_ref.rollout.response_length={response_length}",
            "actor_rollout_ref.rollout.temperature=1.0",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loops}",
            f"data.train_files={work / 'train.parquet'}",
        ])


def trainer_batch(config: Any, tokenizer: Any, parquet: Path, rows: slice = slice(None)) -> DataProto:
    """The batch verl's trainer builds from the dataset: its rows, collated, with a uid each."""
    dataset = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=config.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))[rows]]))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
    return batch


def play(worker: AgentLoopWorker, batch: DataProto) -> DataProto:
    """verl's rollout step and the trainer's join: the generation batch repeated n times
    (interleaved) through the worker, then the rows repeated alike and joined with the outputs;
    the loop's reward score (``rm_scores``) is the token-level reward."""
    gen_batch = RayPPOTrainer._get_gen_batch(None, batch)  # type: ignore[arg-type]  # self is not used
    out = asyncio.run(worker.generate_sequences(gen_batch.repeat(repeat_times=N, interleave=True)))
    joined = batch.repeat(repeat_times=N, interleave=True).union(out)
    joined.batch["token_level_rewards"] = joined.batch["rm_scores"].clone()
    return joined


def credit(batch: DataProto) -> dict[str, Any]:
    """Per estimator: verl's compute_advantage on the batch against completion_advantages group by group."""
    episodes = [Episode.from_dict(json.loads(e)) for e in batch.non_tensor_batch[EPISODE_FIELD]]
    uids, mask = list(batch.non_tensor_batch["uid"]), batch.batch["response_mask"]
    action = torch.zeros_like(mask, dtype=torch.bool)
    for i, e in enumerate(episodes):
        for s in e.steps:
            if s.action is not None:
                action[i, s.action[0]: s.action[1]] = True
    results: dict[str, Any] = {}
    for name in NAMES:
        got = compute_advantage(batch, adv_estimator=verl_name(name), config=AlgoConfig()).batch["advantages"].clone()
        expected = torch.zeros_like(got)
        for uid in dict.fromkeys(uids):
            members = [i for i, u in enumerate(uids) if u == uid]
            values, _ = completion_advantages(name, [episodes[i] for i in members], len(members), got.shape[1])
            expected[members] = torch.as_tensor(np.asarray(values), dtype=got.dtype)
        results[name] = {"equal": bool(torch.equal(got, expected)), "max_abs_diff": float((got - expected).abs().max()),
                         "nonzero_tokens": int((got != 0).sum()),
                         "distinct_values": len({round(float(v), 6) for v in got[got != 0]}),
                         "only_action_tokens": bool(not got[~action].any()),
                         "inside_response_mask": bool(not got[mask == 0].any())}
    return results


def replay(episode: Episode, replies: Sequence[str], task_id: str, max_steps: int = MAX_STEPS) -> dict[str, Any]:
    """The replies through a fresh env from the same seed and task: the env rewards must repeat."""
    env = gym.make(ENV_ID, max_steps=max_steps)
    try:
        env.reset(seed=episode.seed, options={"task_id": task_id})
        rewards, ended = [], False
        for text in replies:
            _, reward, terminated, truncated, info = env.step(text)
            transition = info.get("transition")
            rewards.append(float(transition.env_reward) if transition is not None else float(reward))
            ended = bool(terminated or truncated)
        return {"rewards": rewards, "ended": ended}
    finally:
        env.close()


def error_of(call: Any) -> str:
    try:
        call()
    except Exception as exc:  # the test reads the message
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def main(model_dir: str, work_dir: str) -> None:
    work = Path(work_dir)
    tasks = task_ids(ENV_ID)[:2]
    parquet = write_verl_dataset(work / "train.parquet", ENV_ID, [SEED, REPLAY_SEED], tasks)
    agent_loops = write_agent_loop_config(work / "agent_loops.yaml", max_steps=MAX_STEPS, max_new_tokens=MAX_NEW_TOKENS,
                                         prompt={"format_example": True})
    config = verl_config(model_dir, work, agent_loops)
    server = TransformersServer(model_dir)
    registered = dict(_agent_loop_registry.get(AGENT_NAME, {}))
    worker = AgentLoopWorker(config, server)  # in this process (the trainer makes it a Ray actor)
    rows = [{"agent_name": str(a), **dict(e)}
            for a, e in zip(*(trainer_batch(config, worker.tokenizer, parquet).non_tensor_batch[k]
                              for k in ("agent_name", "extra_info")), strict=True)]
    torch.manual_seed(0)
    t0 = time.perf_counter()
    batch = play(worker, trainer_batch(config, worker.tokenizer, parquet, slice(0, 1)))
    play_s = time.perf_counter() - t0

    responses, mask = batch.batch["responses"], batch.batch["response_mask"]
    episodes = [Episode.from_dict(json.loads(e)) for e in batch.non_tensor_batch[EPISODE_FIELD]]
    uids = list(batch.non_tensor_batch["uid"])
    prompt_width = batch.batch["prompts"].shape[1]
    per_row = []
    logprob_gap = 0.0
    for i, episode in enumerate(episodes):
        spans = torch.zeros(mask.shape[1], dtype=torch.bool)
        for s in episode.steps:
            spans[s.response[0]: s.response[1]] = True
        replies = [worker.tokenizer.decode(responses[i, s.response[0]: s.response[1]].tolist(), skip_special_tokens=True)
                   for s in episode.steps]
        task = batch.non_tensor_batch["extra_info"][i]["task_id"]
        again = replay(episode, replies, task)
        # the server's log-probs against one forward pass over the row's whole sequence
        attention = batch.batch["attention_mask"][i].bool()
        sequence = batch.batch["input_ids"][i][attention]
        with torch.no_grad():
            logits = server.model(sequence.unsqueeze(0)).logits[0].float()
        start = int(attention[:prompt_width].sum())  # the response's first position in ``sequence``
        n_resp = int(attention[prompt_width:].sum())
        target = sequence[start: start + n_resp]
        recomputed = torch.log_softmax(logits[start - 1: start - 1 + n_resp], dim=-1)[torch.arange(n_resp), target]
        rollout_lp = batch.batch["rollout_log_probs"][i, :n_resp]
        own = mask[i, :n_resp].bool()
        logprob_gap = max(logprob_gap, float((rollout_lp[own] - recomputed[own]).abs().max()))
        per_row.append({
            "uid": uids[i], "task_id": episode.task_id, "seed": episode.seed, "row_task": task,
            "steps": len(episode.steps), "env_rewards": [s.env_reward for s in episode.steps],
            "context_keys": [s.context_key for s in episode.steps],
            "rubric_records": ["rubric" in s.info for s in episode.steps],
            "first_anchor": episode.steps[0].anchor, "env_return": episode.env_return,
            "success": episode.success, "truncated_by": episode.truncated_by,
            "replies": replies, "replayed_rewards": again["rewards"], "replay_ended": again["ended"],
            "spans_are_the_mask": bool(torch.equal(spans, mask[i].bool())),
            "actions_inside_spans": all(s.action is None or s.response[0] <= s.action[0] <= s.action[1] <= s.response[1]
                                        for s in episode.steps),
            "has_observation_tokens": bool((mask[i, :n_resp] == 0).any()),
            "rm_score": float(batch.batch["rm_scores"][i].sum()),
            "turn_scores": list(batch.non_tensor_batch["turn_scores"][i]),
            "logprobs_zero_off_mask": bool(not rollout_lp[~own].any()),
            "prompt": batch.batch["prompts"][i][attention[:prompt_width]].tolist(),
            "response_length": n_resp, "num_turns": int(batch.non_tensor_batch["__num_turns__"][i]),
        })
    results = credit(batch)

    # the replayed group: the expert's plan against wandering, through the same loop and worker
    plan, wander = expert_scripts(tasks[1], REPLAY_SEED)
    replay_loops = write_agent_loop_config(work / "replay_loops.yaml", max_steps=len(plan) + 1,
                                           max_new_tokens=MAX_NEW_TOKENS, prompt={"format_example": True})
    replay_config = verl_config(model_dir, work, replay_loops, response_length=REPLAY_RESPONSE_LENGTH)
    replayed = play(AgentLoopWorker(replay_config, ReplayServer(worker.tokenizer, [plan, wander])),
                    trainer_batch(replay_config, worker.tokenizer, parquet, slice(1, 2)))
    replay_episodes = [Episode.from_dict(json.loads(e)) for e in replayed.non_tensor_batch[EPISODE_FIELD]]
    replay_group = {"results": credit(replayed), "successes": [e.success for e in replay_episodes],
                    "returns": [e.env_return for e in replay_episodes], "steps": [len(e.steps) for e in replay_episodes],
                    "rm_scores": replayed.batch["rm_scores"].sum(-1).tolist(), "plan_steps": len(plan)}

    # what the loop refuses: a row without a seed; a first prompt longer than rollout.prompt_length
    no_seed = trainer_batch(config, worker.tokenizer, parquet).slice(0, 1)
    no_seed.non_tensor_batch["extra_info"] = np.array([{"index": 0, "env_id": ENV_ID, "task_id": tasks[0]}],
                                                      dtype=object)
    missing_seed = error_of(lambda: play(worker, no_seed))
    short = AgentLoopWorker(verl_config(model_dir, work, agent_loops, prompt_length=64), server)
    calls = len(server.calls)
    too_long = error_of(lambda: play(short, trainer_batch(config, worker.tokenizer, parquet, slice(0, 1))))
    close_envs()
    t1 = time.perf_counter()
    many = concurrency(model_dir, work, worker.tokenizer, rows=CONCURRENT_ROWS)
    many["seconds"] = round(time.perf_counter() - t1, 1)
    print(json.dumps({
        "concurrency": many,
        "rows": rows, "registered": registered, "per_row": per_row, "results": results, "replay": replay_group,
        "logprob_gap": logprob_gap, "calls": server.calls[:calls], "calls_after_refusals": len(server.calls) - calls,
        "missing_seed_error": missing_seed, "prompt_too_long_error": too_long,
        "batch_keys": sorted(batch.batch.keys()), "non_tensor_keys": sorted(batch.non_tensor_batch.keys()),
        "max_new_tokens": MAX_NEW_TOKENS, "max_steps": MAX_STEPS, "response_length": RESPONSE_LENGTH,
        "seconds": {"import": round(import_s, 1), "play": round(play_s, 1),
                    "total": round(time.perf_counter() - started, 1)},
    }, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
