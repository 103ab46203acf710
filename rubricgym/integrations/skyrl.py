"""rubricgym envs inside SkyRL (``pip install 'rubricgym[skyrl]'``): a SkyRL-gym text env over
any rubricgym env id, registered with SkyRL-gym's registry.

SkyRL's generator keeps one reward per turn (it places each at the end of that turn's response
tokens), which is what a rubricgym env gives: each step's reward here is the reward
``gym.make(env_id)`` returns for the same step (the engine's reward plus the rubric's step
reward, r_TRCA with the benchmark's operator library), and the step's metadata carries the
transition's facts and every rubric record. Nothing is re-scored: the env underneath is the one
``gym.make`` builds, and the prompt is rubricgym's public chat prompt (``rubricgym.prompts``).

Names: ``skyrl_env_name("<env id>")`` is ``"rubricgym-<env id>"`` (a plain name that also works as
a config key and a file name); ``"rubricgym"`` alone plays the env id a row names. SkyRL-gym
0.4.0 discovers no plugins (no entry points), so ``register_skyrl_envs()`` must run in the
process whose generator calls ``skyrl_gym.make`` (SkyRL's ``skyrl_entrypoint``). docs/skyrl.md.

>>> register_skyrl_envs()
>>> env = skyrl_gym.make("rubricgym-ALFWorld-Rubric-v0", env_config={}, extras={"seed": 0, "max_turns": 6})
>>> chat, _ = env.init([])  # rubricgym's chat prompt for the reset env
>>> out = env.step("<think>look first</think><action>look</action>")  # reward, done, metadata
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType
except ImportError as exc:  # the extra is missing: name the fix, not just the module
    raise ImportError(f"rubricgym.integrations.skyrl needs SkyRL-gym ({exc}): pip install 'rubricgym[skyrl]' "
                      "(skyrl-gym==0.4.0)") from exc

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubricgym.contract import Transition
from rubricgym.integrations.trl_rollout import MissingSeed
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages
from rubricgym.registration import check_env_id, env_ids, task_ids
from rubricgym.remote import REMOTE_ENV_ID
from rubricgym.remote.info_json import info_to_json

__all__ = ["ENTRY_POINT", "GENERIC_NAME", "PREFIX", "MissingSeed", "RubricgymTextEnv", "SkyRLEnvSettings",
           "register_skyrl_envs", "skyrl_dataset_rows", "skyrl_env_name", "step_metadata"]

PREFIX = "rubricgym-"
GENERIC_NAME = "rubricgym"  # plays the env id each row names (extras["env_id"])
ENTRY_POINT = "rubricgym.integrations.skyrl:RubricgymTextEnv"  # a string: SkyRL's spec stays JSON, Ray imports it
SETTING_KEYS = ("env_id", "task_id", "seed", "max_steps", "max_turns", "make_kwargs", "prompt_settings")
# Engines change process-wide state (docs/eval.md, "Concurrency"); SkyRL steps envs on a thread
# pool (environment.skyrl_gym.max_env_workers), so every engine call in this process takes turns.
_ENGINE_LOCK = threading.RLock()


def skyrl_env_name(env_id: str) -> str:
    """The SkyRL-gym name of a rubricgym env id: ``"rubricgym-" + env_id``, any ``/`` as ``-``
    (``rubricgym/Remote-v0`` is ``rubricgym-Remote-v0``)."""
    plain = env_id.replace("/", "-")
    return plain if plain.startswith(PREFIX) else PREFIX + plain


class SkyRLEnvSettings(BaseModel):
    """One episode's settings, read from SkyRL's ``env_config`` (the env class's section of
    ``environment.skyrl_gym``), then a row's ``extra_info``, then the row's own columns (SkyRL
    hands every dataset column but the prompt and env class over as ``extras``; later wins)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    env_id: str
    task_id: str | None = None
    seed: int | None = Field(None, description="the reset's seed: the G samples of one row share it")
    max_steps: int | None = Field(None, ge=1, description="the env's step limit (None: the spec's)")
    max_turns: int | None = Field(None, ge=1, description="SkyRL's generator.max_turns (it sets it on every row)")
    make_kwargs: dict[str, Any] = Field(default_factory=dict, description="more gym.make keyword arguments")
    prompt_settings: PromptSettings = Field(default_factory=lambda: PromptSettings(style="chat"))

    @field_validator("prompt_settings")
    @classmethod
    def _chat_only(cls, value: PromptSettings) -> PromptSettings:
        if value.style != "chat":
            raise ValueError("SkyRL keeps one growing conversation: prompt_settings.style must be 'chat'")
        return value

    @field_validator("make_kwargs")
    @classmethod
    def _no_step_limit_inside(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "max_steps" in value:
            raise ValueError("give the step limit as max_steps, not inside make_kwargs")
        return value

    @property
    def step_limit(self) -> int | None:
        """The env's ``max_steps``: the smaller of ``max_steps`` and ``max_turns`` (SkyRL's
        generator stops only when the env says done), None for the spec's default."""
        limits = [v for v in (self.max_steps, self.max_turns) if v is not None]
        return min(limits) if limits else None

    @classmethod
    def read(cls, env_config: Any, extras: Mapping[str, Any] | None, env_id: str | None) -> SkyRLEnvSettings:
        """The settings from SkyRL's two arguments; ``env_id`` is the registered name's (a row
        naming another one is refused)."""
        config = _plain(env_config) if env_config is not None else {}
        if not isinstance(config, dict):
            raise TypeError(f"env_config must be a mapping, got {type(env_config).__name__}")
        row = _plain(extras or {})
        nested = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
        values: dict[str, Any] = dict(config)
        for source in (nested, row):  # a row's make_kwargs and prompt_settings add to the env class's
            for key, value in source.items():
                if key in SETTING_KEYS and value is not None:
                    both = isinstance(value, dict) and isinstance(values.get(key), dict)
                    values[key] = {**values[key], **value} if both else value
        if env_id is not None:
            if values.get("env_id", env_id) != env_id:
                raise ValueError(f"this env plays {env_id}, but its row names env_id={values['env_id']!r}: use "
                                 f"env_class {skyrl_env_name(values['env_id'])!r} or {GENERIC_NAME!r}")
            values["env_id"] = env_id
        if "env_id" not in values:
            raise ValueError(f"env class {GENERIC_NAME!r} plays the env id each row names: add an 'env_id' column")
        if isinstance(values.get("prompt_settings"), dict):
            values["prompt_settings"] = {"style": "chat", **values["prompt_settings"]}
        return cls.model_validate(values)


class RubricgymTextEnv(BaseTextEnv):
    """One rubricgym episode behind SkyRL-gym's BaseTextEnv. ``init`` resets the env and
    returns rubricgym's chat prompt (the row's own prompt only labels the row); ``step`` sends
    the model's text to the env and returns the next observation as a user message, the env's
    reward as is, done (terminated or truncated) and the step's metadata (``step_metadata``)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None,
                 env_id: str | None = None):
        super().__init__()
        self.settings = SkyRLEnvSettings.read(env_config, extras, env_id)
        check_env_id(self.settings.env_id)  # an unknown id fails when SkyRL makes the env, not mid-rollout
        if self.settings.seed is None:
            raise MissingSeed("a SkyRL row has no 'seed': every row needs one so that its samples start from one "
                              "initial state; build rows with rubricgym.integrations.skyrl.skyrl_dataset_rows")
        self.max_turns = self.settings.step_limit or self.max_turns  # SkyRL's attribute; init sets the env's
        self.env: gym.Env[Any, Any] | None = None
        self.view: EpisodeView | None = None
        self.done = False
        self.records: list[dict[str, Any]] = []
        self.outcome: dict[str, Any] | None = None
        self.episode: dict[str, Any] = {}  # env id, task id and seed of the episode init started

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        s = self.settings
        with _ENGINE_LOCK:
            if self.env is None:  # made here, not in __init__: SkyRL runs init on its env thread pool
                limit = {"max_steps": s.step_limit} if s.step_limit is not None else {}
                self.env = gym.make(s.env_id, **s.make_kwargs, **limit)
            obs, info = self.env.reset(seed=s.seed, options={"task_id": s.task_id} if s.task_id else None)
        self.view = EpisodeView.start(self.env, obs, info)
        self.turns, self.done, self.records, self.outcome = 0, False, [], None
        self.max_turns = int(getattr(self.env.unwrapped, "max_steps", None) or self.max_turns)
        self.episode = {"env_id": s.env_id, "task_id": str(info.get("task_id") or s.task_id or ""), "seed": s.seed}
        return build_messages(self.view, s.prompt_settings), {**self.episode, "max_steps": self.max_turns}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.done:
            raise RuntimeError("the episode has ended: make a new env (SkyRL makes one per trajectory)")
        if self.env is None or self.view is None:
            raise RuntimeError("step before init: SkyRL calls init(prompt) first")
        with _ENGINE_LOCK:
            obs, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.done = bool(terminated or truncated)
        self.view.record(action, obs, info)
        if self.done:
            trajectory = getattr(self.env.unwrapped, "trajectory", None)
            self.outcome = trajectory.outcome.model_dump(mode="json") if trajectory is not None else None
        metadata = step_metadata(self.episode, self.turns, obs, float(reward), bool(terminated), bool(truncated),
                                 info, self.outcome)
        self.records.append(metadata)
        observations = [] if self.done else [build_messages(self.view, self.settings.prompt_settings)[-1]]
        return BaseTextEnvStepOutput(observations=observations, reward=float(reward), done=self.done,
                                     metadata=metadata, postprocessed_action=None)

    def get_metrics(self) -> dict[str, Any]:
        """The episode's numbers SkyRL averages over episodes: steps, the env return (engine
        rewards), the return (step rewards summed) and success when the benchmark says it."""
        metrics: dict[str, Any] = {"steps": self.turns, "return": sum(r["reward"] for r in self.records),
                                   "env_return": sum(r["env_reward"] for r in self.records)}
        if self.outcome is not None and self.outcome.get("success") is not None:
            metrics["success"] = float(self.outcome["success"])
        return metrics

    def close(self) -> None:
        if self.env is not None:
            with _ENGINE_LOCK:
                self.env.close()
            self.env = None


def step_metadata(episode: Mapping[str, Any], step: int, observation: str, reward: float, terminated: bool,
                  truncated: bool, info: Mapping[str, Any], outcome: dict[str, Any] | None) -> dict[str, Any]:
    """A step's metadata, all JSON: the episode (env id, task id, seed), the step's number, its
    reward and the engine's part of it, the flags, the observation, the transition's facts (its
    benchmark's typed facts, dumped), context key and failure text, every rubric record
    (``info["rubric"]``) and, once the episode ended, its outcome."""
    transition = info.get("transition")
    typed = transition if isinstance(transition, Transition) else None
    rubric = info_to_json({"rubric": info.get("rubric", {})})[0]["rubric"]
    return {
        **episode, "step": step,
        "reward": reward, "env_reward": float(typed.env_reward) if typed is not None else reward,
        "terminated": terminated, "truncated": truncated, "observation": observation,
        "facts": typed.facts.model_dump(mode="json") if typed is not None else None,
        "context_key": typed.context_key if typed is not None else None,
        "error": typed.error if typed is not None else None,
        "rubric": rubric, "outcome": outcome,
    }


def register_skyrl_envs(ids: Iterable[str] | None = None) -> list[str]:
    """Register rubricgym env ids with SkyRL-gym (``skyrl_env_name`` of each; every registered
    one and the served-env client id by default) and ``GENERIC_NAME``; the names registered.
    Idempotent: a name already registered to this class is kept, one registered to another
    entry point is refused (SkyRL-gym's RegistrationError)."""
    wanted = list(ids) if ids is not None else [*env_ids(), REMOTE_ENV_ID]
    names: list[str] = []
    for env_id, kwargs in [*((check_env_id(i), {"env_id": i}) for i in wanted), (None, {})]:
        name = skyrl_env_name(env_id) if env_id is not None else GENERIC_NAME
        spec = skyrl_gym.registry.get(name)
        if spec is None:
            skyrl_gym.register(id=name, entry_point=ENTRY_POINT, kwargs=kwargs)
        elif spec.entry_point != ENTRY_POINT or spec.kwargs != kwargs:
            raise skyrl_gym.error.RegistrationError(f"SkyRL-gym name {name!r} is registered to {spec.entry_point} "
                                                    f"{spec.kwargs}, not rubricgym's")
        names.append(name)
    return names


def skyrl_dataset_rows(env_id: str, seeds: Iterable[int], tasks: Sequence[str] | None = None,
                       **settings: Any) -> list[dict[str, Any]]:
    """SkyRL dataset rows (write them to parquet for ``data.train_data``): one per seed, with the
    task of that seed (the env id's train tasks in turn, or ``tasks``), its ``env_class`` and any
    more ``settings`` columns (``max_steps``, ``make_kwargs``). The ``prompt`` only labels the
    row (SkyRL filters rows by its length); ``init`` builds the episode's real prompt."""
    env_id = check_env_id(env_id)
    tasks = list(tasks) if tasks is not None else task_ids(env_id)
    rows = []
    for i, seed in enumerate(seeds):
        task = tasks[i % len(tasks)]
        rows.append({"prompt": [{"role": "user", "content": f"{env_id} task {task} seed {seed}"}],
                     "env_class": skyrl_env_name(env_id), "task_id": task, "seed": int(seed), **settings})
    return rows


def _plain(value: Any) -> Any:
    """Plain dicts and lists from SkyRL's config objects (OmegaConf's DictConfig and
    ListConfig are mappings and sequences) and dataset rows."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value
