"""What a policy sees at each step of a multi-turn episode: the prompts rubricgym's trainer
uses, public for your own agent or trainer (the same code, not a copy).

Two styles (docs/design.md §6):

* ``window`` (the TRCA paper's template): a fresh per-step prompt with the task, the last
  K (action, observation) pairs, the current observation, the admissible actions and the
  ``<think>``/``<action>`` instruction. Prompt length stays bounded however long the episode.
* ``chat``: one growing conversation; earlier responses appear as assistant turns and
  observations as user turns. The oldest turns are dropped past ``max_prompt_tokens``.

An ``EpisodeView`` follows one episode (``start`` after reset, ``record`` after each step);
``build_messages`` turns it into chat messages, ``render_prompt`` into token ids.

>>> import gymnasium as gym, rubricgym
>>> env = gym.make("ALFWorld-Rubric-v0")
>>> obs, info = env.reset(seed=0)
>>> view = EpisodeView.start(env, obs, info)
>>> first = build_messages(view, PromptSettings(style="chat"))
>>> [m["role"] for m in first], "<action>" in first[0]["content"]
(['system', 'user'], True)
>>> response = "<think>look first</think><action>look</action>"
>>> obs, reward, terminated, truncated, info = env.step(response)
>>> view.record(response, obs, info)
>>> [m["role"] for m in build_messages(view, PromptSettings(style="chat"))]
['system', 'user', 'assistant', 'user']
>>> env.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Transition
from rubricgym.parsing import ACTION_GRAMMAR, TagGrammar

__all__ = [
    "FORMAT_INSTRUCTION", "EpisodeView", "PastStep", "PromptSettings", "build_messages", "chat_messages",
    "format_instruction", "render_prompt", "shown_actions", "window_messages",
]


class PromptSettings(BaseModel):
    """How prompts are built (the trainer's ``prompt`` section)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    style: Literal["window", "chat"] = Field(
        "window", description="'window': per-step prompt with the last K steps (TRCA); 'chat': growing chat"
    )
    history: int = Field(2, ge=0, description="K: past (action, observation) pairs shown in 'window' style")
    show_admissible: bool = True
    format_example: bool = Field(False, description="append a one-line example reply to the format instruction")
    max_admissible: int = Field(40, ge=1, description="list at most this many admissible actions")
    max_observation_chars: int = Field(1500, ge=64)
    max_prompt_tokens: int = Field(1536, ge=16, description="'chat' drops the oldest turns beyond this")
    restate_task: bool = Field(False, description="repeat the task just before the format instruction: a small "
                               "model attends to what is near the end of its prompt")


def shown_actions(info: Mapping[str, Any]) -> list[str] | None:
    """The actions a prompt lists: the env's action templates (an agent fills in the ``<...>``
    part, e.g. ``search[<keywords>]``), then its admissible actions; None when it lists none."""
    templates = list(info.get("action_templates") or [])
    admissible = info.get("admissible_actions")
    if admissible is None and not templates:
        return None
    return templates + list(admissible or [])


@dataclass
class PastStep:
    response: str
    action: str | None  # the parsed command, None when the response did not parse
    observation: str


@dataclass
class EpisodeView:
    """Everything a prompt may show about one rollout so far (observable text only)."""

    benchmark: str
    instruction: str
    initial_observation: str
    observation: str
    admissible_actions: list[str] | None = None
    history: list[PastStep] = field(default_factory=list)
    grammar: TagGrammar = ACTION_GRAMMAR  # the env's action format (what the instruction asks for)

    @property
    def step(self) -> int:
        return len(self.history)

    @classmethod
    def start(cls, env: gym.Env[Any, Any], observation: str, info: Mapping[str, Any]) -> EpisodeView:
        """The view right after ``env.reset()``: the benchmark's name and action format come
        from the rubricgym env underneath (another env gets its class name and ``<action>``)."""
        adapter = getattr(env.unwrapped, "adapter", None)
        return cls(
            benchmark=getattr(adapter, "benchmark", type(env.unwrapped).__name__),
            instruction=str(info.get("instruction", "")),
            initial_observation=observation,
            observation=observation,
            admissible_actions=shown_actions(info),
            grammar=getattr(adapter, "grammar", ACTION_GRAMMAR),
        )

    def record(self, response: str, observation: str, info: Mapping[str, Any]) -> None:
        """After ``env.step(response)``: the response, its parsed action (None when it did not
        parse) and the new observation join the history."""
        transition = info.get("transition")
        parsed = transition.action if isinstance(transition, Transition) else None
        self.history.append(PastStep(response=response, action=parsed.action if parsed and parsed.ok else None,
                                     observation=observation))
        self.observation = observation
        self.admissible_actions = shown_actions(info)


def format_instruction(grammar: TagGrammar = ACTION_GRAMMAR) -> str:
    """The paper's instruction, for the env's grammar (for ``<think>``/``<action>`` it is the
    paper's text word for word)."""
    think = (f" This reasoning process MUST be enclosed within <{grammar.reasoning_tag}> </{grammar.reasoning_tag}> "
             "tags. Once you've finished your reasoning, you" if grammar.reasoning_tag else " Then you")
    tags = " or ".join(f"<{t}> </{t}>" for t in grammar.action_tags)
    fence = f" (or in one ```{grammar.fence_kind} ``` block)" if grammar.fence_kind else ""
    return ("Now it's your turn to take an action. You should first reason step-by-step about the current "
            f"situation.{think} should choose an admissible action for current step and present it "
            f"within {tags} tags{fence}.")


FORMAT_INSTRUCTION = format_instruction()

FORMAT_EXAMPLE = "\nReply in exactly this format, with one admissible action:\n{example}"


def _format_instruction(view: EpisodeView, settings: PromptSettings) -> str:
    """The instruction, plus (``format_example``) a one-line example reply built from the first
    admissible action: small models copy an example far better than they follow a description
    of the format."""
    text = format_instruction(view.grammar)
    if not settings.format_example:
        return text
    example = (view.admissible_actions or ["<your action>"])[0]
    return text + FORMAT_EXAMPLE.format(example=view.grammar.render(example, reasoning="short reasoning"))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _task_reminder(view: EpisodeView, settings: PromptSettings) -> str:
    return f"Remember, your task is to: {view.instruction}\n\n" if settings.restate_task else ""


def _admissible(view: EpisodeView, settings: PromptSettings) -> str:
    if not settings.show_admissible or not view.admissible_actions:
        return ""
    shown = view.admissible_actions[: settings.max_admissible]
    more = len(view.admissible_actions) - len(shown)
    listing = ", ".join(f"'{a}'" for a in shown) + (f", ... ({more} more)" if more > 0 else "")
    return f"Your admissible actions of the current situation are: [{listing}].\n\n"


def window_messages(view: EpisodeView, settings: PromptSettings) -> list[dict[str, str]]:
    """The TRCA/verl-agent per-step template, with a bounded history window."""
    lim = settings.max_observation_chars
    body = (f"You are an expert agent operating in the {view.benchmark} environment. "
            f"Your task is to: {view.instruction}\n\n")
    if view.step == 0:
        body += f"Your current observation is: {_clip(view.observation, lim)}\n\n"
    else:
        body += f"Prior to this step, you have already taken {view.step} step(s). "
        recent = view.history[-settings.history :] if settings.history else []
        if recent:
            first = view.step - len(recent) + 1
            lines = [
                f"[Step {first + k}] Action: {p.action if p.action is not None else '(invalid response)'}\n"
                f"Observation: {_clip(p.observation, lim)}"
                for k, p in enumerate(recent)
            ]
            body += (f"Below are the most recent {len(recent)} observations and the corresponding actions "
                     f"you took:\n" + "\n".join(lines) + "\n")
        body += (f"You are now at step {view.step + 1} and your current observation is: "
                 f"{_clip(view.observation, lim)}\n\n")
    return [{"role": "user", "content": body + _admissible(view, settings) + _task_reminder(view, settings)
             + _format_instruction(view, settings)}]


def chat_messages(view: EpisodeView, settings: PromptSettings) -> list[dict[str, str]]:
    """The growing conversation: system task, then observation/response turns."""
    lim = settings.max_observation_chars
    system = (
        f"You are an expert agent operating in the {view.benchmark} environment. "
        f"Your task is to: {view.instruction}\n\n{_format_instruction(view, settings)}"
    )
    messages = [{"role": "system", "content": system}]
    observation = view.initial_observation or view.observation
    for past in view.history:
        messages.append({"role": "user", "content": _clip(observation, lim)})
        messages.append({"role": "assistant", "content": past.response})
        observation = past.observation
    current = _clip(view.observation, lim)
    tail = (_admissible(view, settings) + _task_reminder(view, settings)).strip()
    messages.append({"role": "user", "content": current + (f"\n\n{tail}" if tail else "")})
    return messages


def build_messages(view: EpisodeView, settings: PromptSettings | None = None) -> list[dict[str, str]]:
    """The chat messages for the view's current step, in ``settings.style``."""
    settings = settings or PromptSettings()
    return window_messages(view, settings) if settings.style == "window" else chat_messages(view, settings)


def render_prompt(tokenizer: Any, view: EpisodeView, settings: PromptSettings) -> list[int]:
    """Prompt token ids for the current step, within ``max_prompt_tokens``.

    ``chat`` drops the oldest (user, assistant) pairs first; a prompt that still does not fit
    keeps its last ``max_prompt_tokens`` tokens (the current observation and instruction).
    """
    messages = build_messages(view, settings)
    while True:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= settings.max_prompt_tokens:
            return list(ids)
        if settings.style == "chat" and len(messages) > 3:
            messages = messages[:1] + messages[3:]
            continue
        return list(ids[-settings.max_prompt_tokens :])
