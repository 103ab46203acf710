"""A small learned policy over an env's admissible actions: the study's default policy.

An LLM cannot make enough updates on a 2-core CPU to tell estimators apart (a few tokens per
second per sequence), so the sample-efficiency study (``rubricgym study --policy choice``)
trains this instead: a log-linear policy that scores each admissible action from hashed
features of the state and of the action, and samples from the softmax of the scores. It acts
in the same envs, through the same rewards and rubrics, and is trained with the same estimator
code (``rubricgym.estimators``) as the LLM trainer.

How the estimators' choices carry over. An action is one choice, so a step's log-probability is
the chosen action's (one "token"): action placement and response placement put the step's
value on the same log-probability, and the action-level ratio equals the token-level one.
Token placement's only trace is the aggregation: ``token_mean`` and ``step_mean`` weigh every
step the same (one token each), ``rollout_mean_step_mean`` weighs a step 1/(N T_i).

Features (benchmark-agnostic; words are lower-cased ``\\w+`` runs): the action's verb; each of
its other words, with and without the verb; whether a word of the action is in the instruction
or the observation (and which, paired with the verb); whether another shown action that names
a word of the instruction is still untaken (with the action's verb and first word); the words
that follow the action's
argument in the observation (its context: a product's title after its id) that the instruction
also has, counted and named; whether the action repeats the previous action or any earlier one;
the step number (capped) with the verb. Each feature is hashed (crc32, stable across processes)
into ``dim`` buckets; a state's score for an action is the sum of its features' weights. All
weights start at 0: the first policy is uniform over the admissible actions.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["ChoicePolicy", "ChoiceState", "Featurizer", "fill_templates"]

WORD = re.compile(r"\w+")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
PLACEHOLDER = re.compile(r"<[^<>]{1,40}>")  # an action template's free part: search[<keywords>]
ARGUMENT = re.compile(r"\[([^\[\]]{1,200})\]")  # click[b0ygaq7n8q] -> b0ygaq7n8q
CONTEXT_WORDS = 12
MAX_STEP_FEATURE = 10
# words too common to say an action names the task (matching them would say nothing)
STOPWORDS = frozenset("a an the to and or of in on at for with from by is it its your you my me i some "
                      "than lower higher less more up down back".split())


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def fill_templates(actions: Sequence[str], instruction: str) -> list[str]:
    """Admissible actions with every template's free part filled with the instruction text
    (``search[<keywords>]`` -> ``search[<the instruction>]``): a fixed function of the task,
    so the policy chooses whether to search, not what to type."""
    text = " ".join(words(instruction))
    return [PLACEHOLDER.sub(text, a) if PLACEHOLDER.search(a) else a for a in actions]


@dataclass(frozen=True)
class ChoiceState:
    """What the policy sees at one step: the task, the current observation, the admissible
    actions (at least one) and the actions taken so far in the episode."""

    instruction: str
    observation: str
    actions: tuple[str, ...]
    history: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.actions:
            raise ValueError("a choice state needs at least one admissible action")


@dataclass(frozen=True)
class Featurizer:
    """Hashed features of (state, action); ``dim`` buckets."""

    dim: int = 1 << 18
    context_words: int = CONTEXT_WORDS
    _cache: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def _id(self, name: str) -> int:
        cached = self._cache.get(name)
        if cached is None:
            cached = zlib.crc32(name.encode("utf-8")) % self.dim
            if len(self._cache) < 1_000_000:
                self._cache[name] = cached
        return cached

    def names(self, state: ChoiceState, action: str) -> list[str]:
        """The readable feature names of one action in one state (what gets hashed)."""
        act = words(action)
        verb = act[0] if act else ""
        rest = act[1:]
        instruction = {w for w in words(state.instruction) if not w.isdigit()} - STOPWORDS  # numbers: below
        observation = words(state.observation)
        seen = set(observation)
        out = [f"verb={verb}", f"step={min(len(state.history), MAX_STEP_FEATURE)}|{verb}"]
        for w in rest:
            out += [f"word={w}", f"verb={verb}|word={w}"]
            if w in instruction:
                out += [f"inst|{verb}", f"inst|{verb}|{w}"]
            if w in seen:
                out.append(f"obs|{verb}")
        matched = sum(w in instruction for w in rest)
        out.append(f"inst_matches={min(matched, 4)}|{verb}")
        # whether another shown action that names the task is still untaken (options left to choose)
        pending = any(other != action and other not in state.history and
                      any(w in instruction for w in words(other)[1:]) for other in state.actions)
        out.append(f"pending={pending}|{verb}|{rest[0] if rest else ''}")
        context = self._context(action, state.observation)
        if context:
            shared = [w for w in words(" ".join(context)) if w in instruction]
            out.append(f"context_matches={min(len(shared), 6)}|{verb}")
            out += [f"context_inst={w}" for w in shared]
            bounds = [float(n) for n in NUMBER.findall(state.instruction)]
            values = [float(n) for n in NUMBER.findall(" ".join(context))]
            if bounds and values:  # a number next to the action (a price) within the task's numbers
                out.append(f"context_number_within={min(values) <= max(bounds)}|{verb}")
        if state.history:
            previous = state.history[-1]
            out.append(f"prev={words(previous)[0] if words(previous) else ''}|{verb}")
            if action == previous:
                out.append("repeat_previous")
            elif action in state.history:
                out.append(f"repeat_earlier|{verb}")
        return out

    def _context(self, action: str, observation: str) -> list[str]:
        """The text after the action's argument in the observation (a product's title and price
        after its id), split on whitespace, when the argument is one word found there."""
        match = ARGUMENT.search(action)
        if not match:
            return []
        target = words(match.group(1))
        if len(target) != 1:
            return []
        tokens = observation.lower().split()
        at = next((k for k, token in enumerate(tokens) if words(token) == target), None)
        return [] if at is None else tokens[at + 1: at + 1 + self.context_words]

    def features(self, state: ChoiceState) -> list[list[int]]:
        """Per admissible action, its hashed feature ids."""
        return [[self._id(n) for n in self.names(state, a)] for a in state.actions]


class ChoicePolicy(torch.nn.Module):
    """Softmax over a state's admissible actions of the summed weights of their features.

    >>> policy = ChoicePolicy(Featurizer(dim=1024))
    >>> state = ChoiceState("put an apple in the fridge", "You see an apple.", ("look", "take apple", "go to fridge"))
    >>> policy.log_probs(state).exp().tolist()  # every weight 0: uniform
    [0.3333333432674408, 0.3333333432674408, 0.3333333432674408]
    """

    def __init__(self, featurizer: Featurizer | None = None):
        super().__init__()
        self.featurizer = featurizer or Featurizer()
        self.weights = torch.nn.EmbeddingBag(self.featurizer.dim, 1, mode="sum")
        torch.nn.init.zeros_(self.weights.weight)

    def scores(self, state: ChoiceState) -> torch.Tensor:
        """One score per admissible action (shape ``[A]``)."""
        feats = self.featurizer.features(state)
        flat = torch.tensor([f for fs in feats for f in fs], dtype=torch.long)
        offsets = torch.tensor([0, *torch.tensor([len(fs) for fs in feats]).cumsum(0).tolist()[:-1]], dtype=torch.long)
        return self.weights(flat, offsets).squeeze(-1)

    def log_probs(self, state: ChoiceState) -> torch.Tensor:
        return torch.log_softmax(self.scores(state), dim=-1)

    @torch.no_grad()
    def act(self, state: ChoiceState, generator: torch.Generator | None = None, greedy: bool = False) -> tuple[int, float]:
        """The chosen action's index and its log-probability (sampled, or the argmax)."""
        logp = self.log_probs(state)
        index = int(torch.argmax(logp)) if greedy else int(torch.multinomial(logp.exp(), 1, generator=generator))
        return index, float(logp[index])
