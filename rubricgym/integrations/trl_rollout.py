"""Multi-turn rubricgym episodes with TRL's own model, each kept as one completion.

Per prompt row one episode: the env is reset with the row's ``seed`` (and ``task_id``), the
prompt is rubricgym's public chat-accumulation prompt (``rubricgym.prompts``), and every turn
appends the model's response (``env_mask`` 1) and then the chat template's closing of that turn
plus the next observation (``env_mask`` 0). No TRL import here: the trainer is duck-typed
(``model_wrapped``, ``accelerator``, ``processing_class``, ``generation_config``,
``max_completion_length``; with ``use_vllm``, ``vllm_generation``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from rubricgym.integrations.episodes import Episode, EpisodeStep
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages, render_prompt
from rubricgym.registration import check_env_id
from rubricgym.tokens import decode_response, response_token_spans

__all__ = ["LiveEpisode", "MissingSeed", "RubricRollout"]

EPISODE_FIELD = "rubricgym_episode"  # the extra rollout key: reaches reward functions and the trainer


class MissingSeed(ValueError):
    """A prompt row without a ``seed``: its G copies could not share one initial state."""


@dataclass
class LiveEpisode:
    """One episode being played token by token: its env, what the model saw and answered, and
    the episode record credit reads (any engine's agent loop drives it with ``RubricRollout``'s
    ``start_episode`` and ``step_episode``)."""

    env: gym.Env[Any, Any]
    view: EpisodeView
    prompt_ids: list[int]
    episode: Episode
    completion: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)  # the sampler's, per completion token (vLLM)
    done: bool = False


class RubricRollout:
    """A TRL ``rollout_func(prompts, trainer) -> dict`` over ``env_id``; the rows (with their
    ``seed``) come from the trainer (``RubricGRPOTrainer`` hands them over). Its envs are reused
    across calls; ``close()`` closes them. ``seconds`` adds up where its time went: ``generation``
    (the model), ``environment`` (reset and step) and ``bookkeeping`` (prompts, token spans, the
    observation turns: rubricgym's own cost)."""

    def __init__(self, env_id: str, *, prompt: PromptSettings | None = None, max_new_tokens: int = 256,
                 min_turn_tokens: int = 8, **make_kwargs: Any):
        self.env_id = check_env_id(env_id)
        self.prompt = prompt or PromptSettings(style="chat")
        if self.prompt.style != "chat":
            # an episode here is one token sequence that grows by each observation turn; 'window'
            # rebuilds every step's prompt from the last K steps, which no growing sequence holds
            raise ValueError(f"prompt style {self.prompt.style!r} cannot be played as one growing sequence: the TRL "
                             "and verl routes use style 'chat' (rubricgym's own trainer plays 'window')")
        self.max_new_tokens = max_new_tokens
        self.min_turn_tokens = min_turn_tokens
        self.make_kwargs = make_kwargs
        self.envs: list[gym.Env[Any, Any]] = []
        self.seconds = {"generation": 0.0, "environment": 0.0, "bookkeeping": 0.0}

    def env(self, k: int) -> gym.Env[Any, Any]:
        while len(self.envs) <= k:
            self.envs.append(gym.make(self.env_id, **self.make_kwargs))
        return self.envs[k]

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        rows = getattr(trainer, "rubricgym_rows", None)
        if rows is None or len(rows) != len(prompts):
            raise TypeError("rubricgym_rollout_func needs each prompt row's seed: train with "
                            "rubricgym.integrations.trl.RubricGRPOTrainer, which hands the rows to it")
        tokenizer = trainer.processing_class
        live = [self.start_episode(k, row, tokenizer) for k, row in enumerate(rows)]
        budget = int(trainer.max_completion_length)
        use_vllm = bool(getattr(trainer, "use_vllm", False))
        while _any_process_active(trainer, sum(not x.done for x in live), collective=use_vllm):
            # vLLM's generate is collective across processes (server mode gathers every process's
            # prompts and slices the answers by an equal count): there every process sends all its
            # rows each turn, for as long as any process has an episode going
            sending = live if use_vllm and _processes(trainer) > 1 else [x for x in live if not x.done]
            sequences = [x.prompt_ids + x.completion for x in sending]
            started = time.perf_counter()
            if use_vllm:
                responses, logprobs = self._generate_vllm(trainer, sequences, min(self.max_new_tokens, budget))
            else:
                responses = self._generate(trainer, sequences, min(self.max_new_tokens, budget))
                logprobs = [[None] * len(ids) for ids in responses]
            self.seconds["generation"] += time.perf_counter() - started
            for x, ids, lps in zip(sending, responses, logprobs, strict=True):
                if not x.done:
                    cut = budget - len(x.completion)
                    x.logprobs += lps[:cut]
                    self.step_episode(x, ids[:cut], tokenizer, budget)
        return {
            "prompt_ids": [x.prompt_ids for x in live],
            "completion_ids": [x.completion for x in live],
            "logprobs": [x.logprobs for x in live] if use_vllm else None,
            "env_mask": [x.env_mask for x in live],
            EPISODE_FIELD: [x.episode.to_dict() for x in live],
        }

    def start_episode(self, k: int, row: Mapping[str, Any], tokenizer: Any) -> LiveEpisode:
        """Reset env ``k`` to the row's ``seed`` (and ``task_id``) and render the first prompt."""
        if row.get("seed") is None:
            raise MissingSeed(f"prompt row {k} has no 'seed': every row needs one so that its G copies start from "
                              "one initial state; build rows with rubricgym_dataset(env_id, seeds=...) or add a "
                              "'seed' column")
        seed, task_id = int(row["seed"]), row.get("task_id")
        started = time.perf_counter()
        env = self.env(k)
        obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
        reset = time.perf_counter()
        self.seconds["environment"] += reset - started
        task = str(task_id or info.get("task_id", ""))
        view = EpisodeView.start(env, obs, info)
        episode = Episode(task_id=task, seed=seed, group_key=f"{task}|seed={seed}")
        live = LiveEpisode(env, view, render_prompt(tokenizer, view, self.prompt), episode)
        self.seconds["bookkeeping"] += time.perf_counter() - reset
        return live

    @staticmethod
    def _generate(trainer: Any, sequences: Sequence[list[int]], max_new_tokens: int) -> list[list[int]]:
        """One sampled response per sequence with TRL's model and sampling settings, cut after
        the first stop token (as TRL's own transformers path does)."""
        import torch  # optional: the trl extra
        from trl.models import unwrap_model_for_generation  # optional: the trl extra

        tokenizer = trainer.processing_class
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), pad, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq):] = torch.tensor(seq)
            attention[row, width - len(seq):] = 1
        config = copy.deepcopy(trainer.generation_config)
        config.max_new_tokens = max_new_tokens
        stops = set(trainer.eos_token_ids)
        device = trainer.accelerator.device
        with (unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                          generation_kwargs=trainer.generation_kwargs) as model, torch.no_grad()):
            out = model.generate(input_ids=ids.to(device), attention_mask=attention.to(device),
                                 generation_config=config)
        responses = []
        for row in out[:, width:].tolist():
            end = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
            responses.append(row[:end])
        return responses

    @staticmethod
    def _generate_vllm(trainer: Any, sequences: Sequence[list[int]],
                       max_new_tokens: int) -> tuple[list[list[int]], list[list[float | None]]]:
        """One response per sequence from TRL's vLLM engine (``trainer.vllm_generation``, whose
        weights TRL syncs before calling the rollout), capped at one turn's tokens rather than
        the episode's ``max_completion_length``; with the sampled tokens' log-probs (top-1)."""
        generation = trainer.vllm_generation
        episode_cap = generation.max_completion_length
        generation.max_completion_length = max_new_tokens
        try:
            _, completion_ids, logprobs, _ = generation.generate(prompts=[list(s) for s in sequences], images=None,
                                                                 num_generations=1)
        finally:
            generation.max_completion_length = episode_cap
        responses = [list(ids) for ids in completion_ids]
        if logprobs is None:
            return responses, [[None] * len(ids) for ids in responses]
        return responses, [[token[0] for token in seq] for seq in logprobs]

    def step_episode(self, x: LiveEpisode, response_ids: list[int], tokenizer: Any, budget: int) -> None:
        """Step the env with one response; append it (mask 1) and, if the episode goes on, the
        next observation turn (mask 0), or end it as truncated when the budget is spent."""
        started = time.perf_counter()
        text = decode_response(tokenizer, response_ids)
        stepped = time.perf_counter()
        obs, reward, terminated, truncated, info = x.env.step(text)
        recorded = time.perf_counter()
        self._record(x, response_ids, text, obs, float(reward), bool(terminated), bool(truncated), info,
                     tokenizer, budget)
        self.seconds["environment"] += recorded - stepped
        self.seconds["bookkeeping"] += (stepped - started) + (time.perf_counter() - recorded)

    def _record(self, x: LiveEpisode, response_ids: list[int], text: str, obs: str, reward: float, terminated: bool,
                truncated: bool, info: dict[str, Any], tokenizer: Any, budget: int) -> None:
        transition = info.get("transition")
        parsed = transition.action if transition is not None else None
        reasoning, action = response_token_spans(tokenizer, response_ids, text,
                                                 parsed.reasoning_span if parsed else None,
                                                 parsed.action_span if parsed else None)
        at = len(x.completion)
        x.episode.steps.append(EpisodeStep(
            response=(at, at + len(response_ids)), action=_shift(action, at), reasoning=_shift(reasoning, at),
            env_reward=float(transition.env_reward) if transition is not None else float(reward),
            reward=float(reward), context_key=transition.context_key if transition is not None else "",
            info={"rubric": info["rubric"]} if "rubric" in info else {}, anchor=x.view.observation,
        ))
        x.completion += response_ids
        x.env_mask += [1] * len(response_ids)
        x.view.record(text, obs, info)
        trajectory = getattr(x.env.unwrapped, "trajectory", None)
        if terminated or truncated:
            x.done = True
            x.episode.truncated_by = "max_steps" if truncated and not terminated else None
            success = trajectory.outcome.success if trajectory is not None else None
            x.episode.success = bool(success) if success is not None else x.episode.env_return > 0
            x.episode.trajectory = trajectory.to_json_line() if trajectory is not None else None
            return
        turn = self._observation_ids(tokenizer, x.view, response_ids, text)
        if len(x.completion) + len(turn) + self.min_turn_tokens > budget:
            x.done, x.episode.truncated_by, x.episode.success = True, "max_completion_length", False
            x.episode.trajectory = trajectory.to_json_line() if trajectory is not None else None
            return
        x.completion += turn
        x.env_mask += [0] * len(turn)
        x.logprobs += [0.0] * len(turn)  # not sampled: env_mask 0 keeps them out of TRL's ratio

    def _observation_ids(self, tokenizer: Any, view: EpisodeView, response_ids: list[int], text: str) -> list[int]:
        """The tokens between this response and the next one: the chat template's end of the
        assistant turn (less a stop token the model already wrote), the observation turn and the
        generation prompt; the same text ``render_prompt`` would show for the next step."""
        messages = build_messages(view, self.prompt)
        before = tokenizer.apply_chat_template(messages[:-1], tokenize=False)
        after = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        end = before.rfind(text)
        closing = before[end + len(text):] if end >= 0 and text else ""
        if response_ids:
            stop = tokenizer.decode(response_ids[-1:])
            if stop and closing.startswith(stop) and response_ids[-1] in _stop_ids(tokenizer):
                closing = closing[len(stop):]
        new = after[len(before):] if after.startswith(before) else after
        return list(tokenizer(closing + new, add_special_tokens=False)["input_ids"])


def _processes(trainer: Any) -> int:
    return int(getattr(trainer.accelerator, "num_processes", 1))


def _any_process_active(trainer: Any, active: int, *, collective: bool) -> bool:
    """Whether an episode is still going here or, when generation is collective, on any process."""
    if not collective or _processes(trainer) == 1:
        return active > 0
    import torch  # optional: the trl extra

    accelerator = trainer.accelerator
    return int(accelerator.gather(torch.tensor([active], device=accelerator.device)).sum()) > 0


def _stop_ids(tokenizer: Any) -> set[int]:
    ids = tokenizer.eos_token_id
    return set(ids) if isinstance(ids, list) else {ids}


def _shift(span: tuple[int, int] | None, by: int) -> tuple[int, int] | None:
    return None if span is None else (span[0] + by, span[1] + by)
