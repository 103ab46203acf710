"""rubricgym episodes as a verl agent loop (verl 0.9.1; issue 55, item 1; docs/verl.md).

``RubricAgentLoop`` (registered with verl's ``register`` as ``rubricgym_agent``) plays one episode
of any rubricgym env id for one dataset row: the env is reset with the row's ``seed`` and
``task_id`` (so the G rollouts of a row, which verl repeats with one ``uid``, share one initial
state), each turn renders rubricgym's public prompt, asks verl's server manager
(``server_manager.generate``, token ids in and out) for a reply, steps the env, and appends the
reply (``response_mask`` 1) and then the next observation turn (``response_mask`` 0). The turn
mechanics are the TRL route's (``RubricRollout``'s prompt, parsing, step records and token
spans), so both routes hand their trainers the same episodes. The output is verl's
``AgentLoopOutput`` with the episode return as ``reward_score`` (verl's ``rm_scores`` on the last
token) and, in ``extra_fields``, ``rubricgym_episode``: ``Episode.to_dict()`` as JSON, with every
step's env reward, context key, rubric records and token spans, the field rubricgym's
estimators (``rubricgym.integrations.verl``) read from the batch, and ``rubricgym_env_id`` (whose
benchmark's outcome rule they apply). ``turn_scores`` (verl's own per-turn key) holds the steps'
env rewards.

``verl_rows`` / ``write_verl_dataset`` write verl's parquet rows for an env id's tasks;
``write_agent_loop_config`` writes the file ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
points at. verl is imported here, so this module lives only where verl is installed
(``.venvs/verl``, ``make verl-venv``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
except ImportError as exc:  # verl is missing: name the fix, not just the module
    raise ImportError(f"rubricgym.integrations.verl_agent_loop needs verl ({exc}): use the venv `make verl-venv` "
                      "builds (.venvs/verl, verl==0.9.1), docs/verl.md") from exc

from rubricgym.integrations.trl_rollout import RubricRollout
from rubricgym.integrations.verl import ENV_ID_FIELD, EPISODE_FIELD, episode_field
from rubricgym.prompts import PromptSettings
from rubricgym.registration import check_env_id, task_ids

__all__ = ["AGENT_NAME", "RubricAgentLoop", "close_envs", "verl_rows", "write_agent_loop_config", "write_verl_dataset"]

AGENT_NAME = "rubricgym_agent"
_TARGET = "rubricgym.integrations.verl_agent_loop.RubricAgentLoop"
# Envs outlive one agent loop (verl makes a loop object per sample): free ones wait here, per
# env id and make settings, each inside the RubricRollout that plays it.
_POOL: dict[tuple[str, tuple[tuple[str, Any], ...]], list[RubricRollout]] = {}


@register(AGENT_NAME)
class RubricAgentLoop(AgentLoopBase):
    """One rubricgym episode per dataset row, through verl's server manager.

    Settings (keys of the agent loop config entry, all optional): ``env_id`` (used when the
    row's ``extra_info`` has none), ``max_steps`` (the env's step budget, given to ``gym.make``),
    ``max_new_tokens`` (per turn), ``min_turn_tokens`` (room a next turn needs),
    ``prompt`` (``PromptSettings`` fields; default the chat style), ``make_kwargs`` (more
    ``gym.make`` arguments). The episode also ends when the response would pass
    ``rollout.response_length`` (``truncated_by="max_completion_length"``, as in the TRL route),
    so verl's padding never cuts a step's tokens off."""

    def __init__(self, *args: Any, env_id: str | None = None, max_steps: int | None = None,
                 max_new_tokens: int = 256, min_turn_tokens: int = 8, prompt: Mapping[str, Any] | None = None,
                 make_kwargs: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.env_id = env_id
        self.max_new_tokens = int(max_new_tokens)
        self.min_turn_tokens = int(min_turn_tokens)
        self.prompt = PromptSettings(**{"style": "chat", **dict(prompt or {})})
        self.make_kwargs = {**dict(make_kwargs or {}), **({"max_steps": int(max_steps)} if max_steps else {})}
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode (``extra_info``: ``env_id``, ``seed``, ``task_id``)."""
        extra = dict(kwargs.get("extra_info") or {})
        if not (extra.get("env_id") or self.env_id):
            raise ValueError("no env id: the row's extra_info has no 'env_id' (write rows with verl_rows) and the agent "
                             "loop config sets no env_id")
        env_id = check_env_id(str(extra.get("env_id") or self.env_id))
        rollout = self._take(env_id)
        try:
            return await self._play(rollout, extra, sampling_params)
        finally:
            _POOL[self._key(env_id)].append(rollout)

    async def _play(self, rollout: RubricRollout, extra: Mapping[str, Any],
                    sampling_params: dict[str, Any]) -> AgentLoopOutput:
        seconds = dict(rollout.seconds)
        x = rollout.start_episode(0, {"seed": extra.get("seed"), "task_id": extra.get("task_id")}, self.tokenizer)
        if len(x.prompt_ids) > self.prompt_length:
            raise ValueError(f"{rollout.env_id} seed {x.episode.seed}: the first prompt has {len(x.prompt_ids)} tokens, "
                             f"more than actor_rollout_ref.rollout.prompt_length={self.prompt_length}; raise it "
                             "(a cut prompt is not the one the model answered)")
        request_id = uuid4().hex  # one per episode: the server may reuse the shared prefix
        logprobs: list[float] | None = []
        generation = 0.0
        while not x.done:
            room = self.response_length - len(x.completion)
            params = {**sampling_params, "max_tokens": min(self.max_new_tokens, room)}
            started = time.perf_counter()
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=x.prompt_ids + x.completion,
                                                     sampling_params=params)
            generation += time.perf_counter() - started
            ids = list(out.token_ids)[:room]
            rollout.step_episode(x, ids, self.tokenizer, self.response_length)
            if logprobs is not None and out.log_probs is not None:
                # the reply's own log-probs, then 0 for the observation turn (response_mask 0)
                logprobs += [float(v) for v in out.log_probs[: len(ids)]]
                logprobs += [0.0] * (len(x.completion) - len(logprobs))
            else:
                logprobs = None  # a server that gives none for one turn gives none for the episode
        episode = x.episode
        environment = rollout.seconds["environment"] - seconds["environment"]
        # num_turns: the prompt, each reply, and an observation turn after each reply but the last
        return AgentLoopOutput(
            prompt_ids=x.prompt_ids, response_ids=x.completion, response_mask=x.env_mask,
            response_logprobs=logprobs, reward_score=float(episode.env_return), num_turns=2 * len(episode.steps),
            metrics=AgentLoopMetrics(generate_sequences=generation, tool_calls=environment),
            extra_fields={EPISODE_FIELD: episode_field(episode), ENV_ID_FIELD: rollout.env_id,
                          "turn_scores": [s.env_reward for s in episode.steps], "tool_rewards": []},
        )

    def _key(self, env_id: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
        return env_id, tuple(sorted(self.make_kwargs.items()))

    def _take(self, env_id: str) -> RubricRollout:
        free = _POOL.setdefault(self._key(env_id), [])
        rollout = free.pop() if free else RubricRollout(env_id, **self.make_kwargs)
        rollout.prompt, rollout.min_turn_tokens = self.prompt, self.min_turn_tokens
        return rollout


def close_envs() -> None:
    """Close the envs the agent loops of this process keep for reuse."""
    for rollouts in _POOL.values():
        for rollout in rollouts:
            rollout.close()
    _POOL.clear()


def verl_rows(env_id: str, seeds: Iterable[int], tasks: Sequence[str] | None = None, *,
              agent_name: str = AGENT_NAME, data_source: str | None = None) -> list[dict[str, Any]]:
    """verl dataset rows, one per seed, with the task of that seed (the env id's train tasks in
    turn, or ``tasks``; the TRL route's ``rubricgym_dataset`` convention). ``extra_info`` carries
    ``env_id``, ``seed``, ``task_id`` and verl's ``index``; ``prompt`` only labels the row (verl's
    dataset needs one): the episode's real prompt is built from the env."""
    env_id = check_env_id(env_id)
    tasks = list(tasks) if tasks is not None else task_ids(env_id)
    if not tasks:
        raise ValueError(f"{env_id} has no tasks to write rows for: pass tasks=")
    rows = []
    for i, seed in enumerate(seeds):
        task = tasks[i % len(tasks)]
        rows.append({"data_source": data_source or env_id, "agent_name": agent_name,
                     "prompt": [{"role": "user", "content": f"{env_id} task {task} seed {int(seed)}"}],
                     "extra_info": {"index": i, "env_id": env_id, "seed": int(seed), "task_id": task}})
    return rows


def write_verl_dataset(path: str | Path, env_id: str, seeds: Iterable[int], tasks: Sequence[str] | None = None,
                       **row_settings: Any) -> Path:
    """Write ``verl_rows(...)`` as the parquet file verl's ``data.train_files`` reads."""
    import pandas as pd  # verl's own requirement: its dataset reads parquet with it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(verl_rows(env_id, seeds, tasks, **row_settings)).to_parquet(path)
    return path


def write_agent_loop_config(path: str | Path, *, name: str = AGENT_NAME, **settings: Any) -> Path:
    """Write the yaml that ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names: one
    entry, ``name`` -> ``RubricAgentLoop`` with ``settings`` (its keyword arguments). verl's
    agent loop workers (Ray actors) load it, which also imports this module there."""
    from omegaconf import OmegaConf  # verl's own requirement: verl loads this file with it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create([{"name": name, "_target_": _TARGET, **settings}]), path)
    return path
