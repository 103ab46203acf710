"""A small deterministic text task for trainer tests: pick the right word.

Every task asks the agent to choose among a few words; the correct action is always
``apple``. A wrong word answers "Wrong." and the episode continues until the budget ends.
The adapter is a real ``rubricgym.adapter.Adapter`` played through ``RubricEnv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rubricgym.adapter import Adapter, EngineReset, EngineStep, PolicyFailure, TaskBinding
from rubricgym.contract import Facts, Outcome, ParsedAction
from rubricgym.benchmark import BenchmarkSpec
from rubricgym.env import RubricEnv
from rubricgym.env_factories import register_env_factory
from rubricgym.registration import register_benchmark

WORDS = ["apple", "bread", "chair", "drum", "eagle", "flute"]
CORRECT = "apple"


class WordFacts(Facts):
    benchmark: ClassVar[str] = "WordPick"
    correct: bool = False


class WordAdapter(Adapter):
    benchmark = "WordPick"
    facts_model = WordFacts

    def __init__(self, num_tasks: int = 2):
        self.num_tasks = num_tasks
        self.task = ""
        self.tries = 0
        self.won = False

    def task_ids(self):
        return [f"pick-{k}" for k in range(self.num_tasks)]

    def _state(self, text: str) -> dict:
        return dict(observation=text, state_signature=f"tries={self.tries},won={self.won}",
                    admissible_actions=list(WORDS), context_key=f"tries={self.tries}")

    def reset(self, task_id: str, seed):
        self.task, self.tries, self.won = task_id, 0, False
        return EngineReset(instruction="say the secret word", **self._state("Words: " + " ".join(WORDS)))

    def step(self, action: ParsedAction) -> EngineStep:
        self.tries += 1
        self.won = action.action == CORRECT
        return EngineStep(**self._state("Right!" if self.won else "Wrong."), reward=1.0 if self.won else 0.0,
                          terminated=self.won, accepted=action.action in WORDS,
                          benchmark_facts={"correct": self.won})

    def binding(self) -> TaskBinding:
        return TaskBinding()

    def outcome(self) -> Outcome:
        return Outcome(success=self.won, score=1.0 if self.won else 0.0)


def make_word_env(max_steps: int = 2, num_tasks: int = 2) -> RubricEnv:
    return RubricEnv(WordAdapter(num_tasks=num_tasks), max_steps=max_steps)


def warm_start_format(model, tokenizer, prompt_ids: list[list[int]], steps: int = 120, lr: float = 3e-3,
                      seed: int = 0) -> None:
    """Supervised warm start: teach a random tiny model the ``<action>WORD</action>`` format
    with the words uniformly mixed, so RL starts from a policy that answers in format but
    picks the correct word only by chance (about 1 in len(WORDS))."""
    import torch

    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    eos = tokenizer.eos_token_id
    model.train()
    for _ in range(steps):
        rows = []
        for k in range(len(WORDS) * 2):
            p = prompt_ids[int(torch.randint(len(prompt_ids), (1,), generator=g))]
            w = WORDS[k % len(WORDS)]
            r = tokenizer(f"<action>{w}</action>", add_special_tokens=False)["input_ids"] + [eos]
            rows.append((p, r))
        width = max(len(p) + len(r) for p, r in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_token_id)
        labels = torch.full((len(rows), width), -100)
        att = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (p, r) in enumerate(rows):
            seq = torch.tensor(p + r)
            ids[i, : len(seq)] = seq
            labels[i, len(p) : len(seq)] = torch.tensor(r)
            att[i, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()


class ExpertWordFacts(WordFacts):
    benchmark: ClassVar[str] = "WordPickExpert"


class ExpertWordAdapter(WordAdapter):
    """The word task as a registered benchmark whose spec declares an expert player (the
    correct word), for warm-start tests."""

    benchmark = "WordPickExpert"
    facts_model = ExpertWordFacts


def expert_actions(adapter: ExpertWordAdapter) -> list[str]:
    return [CORRECT]


register_benchmark(BenchmarkSpec(name="WordPickExpert", facts_model=ExpertWordFacts, binding_model=TaskBinding,
                                 binder=f"{__name__}:expert_actions", expert=f"{__name__}:expert_actions"))


def make_expert_word_env(max_steps: int = 2, num_tasks: int = 4) -> RubricEnv:
    return RubricEnv(ExpertWordAdapter(num_tasks=num_tasks), max_steps=max_steps)


def make_trca_word_env(max_steps: int = 2, num_tasks: int = 4):
    """The word task with a TRCA operator library attached (for estimator studies)."""
    from pathlib import Path

    from rubricgym.rewards import RewardContext
    from rubricgym.trca import TRCAConfig, TRCAReward

    adapter = ExpertWordAdapter(num_tasks=num_tasks)
    context = RewardContext(benchmark=adapter.benchmark, facts_model=adapter.facts_model,
                            binding_model=adapter.binding_model)
    env = RubricEnv(adapter, max_steps=max_steps)
    return TRCAReward(env, TRCAConfig(library=Path(__file__).with_name("word_library.yaml")), context=context)


# env.factory names a registered factory, never an import path: these are the tests' own
register_env_factory("word", make_word_env)
register_env_factory("expert-word", make_expert_word_env)
register_env_factory("trca-word", make_trca_word_env)


class FragileWordAdapter(ExpertWordAdapter):
    """The expert word task whose engine breaks on the word ``crash``: the action's content
    breaking the engine, a policy failure (issue 28)."""

    def step(self, action: ParsedAction) -> EngineStep:
        if action.action == "crash":
            self.tries += 1
            raise PolicyFailure("the word engine crashed on 'crash'", {"correct": False})
        return super().step(action)


def make_fragile_trca_word_env(max_steps: int = 2, num_tasks: int = 1):
    """The fragile word task with the TRCA library attached."""
    from rubricgym.rewards import RewardContext
    from rubricgym.trca import TRCAConfig, TRCAReward

    adapter = FragileWordAdapter(num_tasks=num_tasks)
    context = RewardContext(benchmark=adapter.benchmark, facts_model=adapter.facts_model,
                            binding_model=adapter.binding_model)
    return TRCAReward(RubricEnv(adapter, max_steps=max_steps),
                      TRCAConfig(library=Path(__file__).with_name("word_library.yaml")), context=context)
