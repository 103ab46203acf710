"""``ALFWorldAdapter``: alfworld's real TextWorld engine behind rubricgym's adapter contract.

Games load with ``textworld.start`` and alfworld's own wrappers (``AlfredDemangler``,
``AlfredInfos``), exactly as ``AlfredTWEnv`` builds them (``engine.py``). Facts come from
``ObservedWorld`` (command + feedback text); the engine's win flag only sets the reward and
termination.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rubricgym import Adapter, EngineFailure, EngineReset, EngineState, EngineStep, Outcome, ParsedAction
from rubricgym.adapters.alfworld.binder import bind_task
from rubricgym.adapters.alfworld.engine import (
    EngineCache,
    collect_games,
    planner_commands,
    reset_seed,
    resolve_split_dir,
    seeded_global_random,
)
from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts
from rubricgym.adapters.alfworld.observe import NOTHING, ObservedWorld
from rubricgym.process_state import preserved_process_state, preserves_process_state


class ALFWorldAdapter(Adapter):
    """One ALFWorld game at a time; ``split`` "train" or "eval" (official: valid_seen).

    ``data_path`` (or ``$ALFWORLD_DATA`` holding ``json_2.1.1/``) selects official-format
    data; otherwise the bundled generated games are used. ``domain_randomization`` shuffles
    entity numbering per reset (alfworld's training option), seeded by the reset seed.
    Loading a game parses the PDDL domain and grammar (seconds), so up to ``engine_cache``
    loaded games are kept and re-used across resets.

    ``fast_invalid``: TextWorld's PDDL engine executes a command only when it is exactly one
    of its valid commands and otherwise answers "Nothing happens." without changing state
    (``textworld/envs/pddl/pddl.py``, ``step``); re-deriving every valid command for that
    answer costs a full engine step, so such commands are answered here. The test suite
    checks this against the engine itself (``fast_invalid=False``).
    """

    benchmark: ClassVar[str] = "ALFWorld"
    facts_model: ClassVar[type[ALFWorldFacts]] = ALFWorldFacts
    binding_model: ClassVar[type[ALFWorldBinding]] = ALFWorldBinding

    @preserves_process_state
    def __init__(self, split: str = "train", data_path: str | os.PathLike[str] | None = None,
                 domain_randomization: bool = False, engine_cache: int = 32, fast_invalid: bool = True):
        self.split = split
        self.split_dir, self.source = resolve_split_dir(split, data_path)
        self._games = collect_games(self.split_dir)
        if not self._games:
            raise FileNotFoundError(f"no solvable ALFWorld games in {self.split_dir}")
        self.domain_randomization = domain_randomization
        self.fast_invalid = fast_invalid
        self._engines = EngineCache(engine_cache)
        self._env: Any = None
        self._task_id: str | None = None
        self._seed: int | None = None
        self._binding = ALFWorldBinding()
        self._world = ObservedWorld()
        self._commands: list[str] = []  # accepted commands this episode, for expert_plan replay
        self._admissible: list[str] = []
        self._admissible_set: frozenset[str] = frozenset()
        self._won = False
        self._plans: dict[str, list[str]] = {}

    # -- contract -----------------------------------------------------------------------
    def task_ids(self) -> Sequence[str]:
        return list(self._games)

    def game_file(self, task_id: str | None = None) -> Path:
        return self._games[task_id or self._require_task()]

    # alfworld and its planner are programs at heart (sys.argv, $ALFWORLD_DATA, ...): every
    # call into them leaves the caller's process-global state as it found it
    @preserves_process_state
    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        if task_id not in self._games:
            raise KeyError(f"unknown ALFWorld task {task_id!r}")
        game_file = self._games[task_id]
        try:
            with seeded_global_random(reset_seed(task_id, seed)):
                self._env = self._engines.get(game_file, shuffle=self.domain_randomization)
                state = self._env.reset()
        except Exception as exc:
            self._engines.drop(game_file)
            self._env = None
            raise EngineFailure(f"could not load {task_id}: {type(exc).__name__}: {exc}") from exc
        self._task_id, self._seed = task_id, seed
        intro = state.feedback
        self._binding = bind_task(intro)
        self._world = ObservedWorld(binding=self._binding)
        self._world.start(intro)
        self._commands = []
        self._admissible = list(state.admissible_commands or [])
        self._admissible_set = frozenset(self._admissible)
        self._won = bool(state.won)
        instruction = intro.rsplit("Your task is to:", 1)[-1].strip() if "Your task is to:" in intro else intro
        return EngineReset(
            observation=intro,
            instruction=instruction,
            state_signature=self._world.signature(),
            admissible_actions=list(self._admissible),
            entities=self._world.entities(),
            context_key=self._world.context_key(),
            benchmark_facts=self._world.state_facts(len(self._admissible)),
            info={"game_file": str(game_file), "source": self.source},
        )

    def step(self, action: ParsedAction) -> EngineStep:
        if self._env is None:
            raise EngineFailure("ALFWorld engine is not running; reset first")
        command_text = action.action or ""
        if self.fast_invalid and command_text.strip() not in self._admissible_set:
            feedback = NOTHING  # exactly the engine's answer; its state does not change
        else:
            try:
                with preserved_process_state():  # only engine calls pay for the snapshot
                    state, _, _ = self._env.step(command_text)
            except Exception as exc:  # the engine itself broke
                raise EngineFailure(f"{type(exc).__name__}: {exc}") from exc
            feedback = state.feedback or ""
            self._admissible = list(state.admissible_commands or [])
            self._admissible_set = frozenset(self._admissible)
            self._won = bool(state.won)
        facts = self._world.step(command_text, feedback, len(self._admissible))
        nothing_happens = facts["nothing_happens"]
        if not nothing_happens:
            self._commands.append(command_text.strip())
        return EngineStep(
            observation=feedback,
            state_signature=self._world.signature(),
            admissible_actions=list(self._admissible),
            entities=self._world.entities(),
            context_key=self._world.context_key(),
            benchmark_facts=facts,
            reward=1.0 if self._won else 0.0,
            terminated=self._won,
            accepted=not nothing_happens,
            error_text=feedback.strip() if nothing_happens else "",
        )

    def invalid_step(self, action: ParsedAction, state: EngineState) -> EngineStep:
        """An unparseable response: the engine is not called; no event facts, state kept."""
        step = super().invalid_step(action, state)
        return step.model_copy(update={"benchmark_facts": self._world.state_facts(len(self._admissible))})

    def binding(self) -> ALFWorldBinding:
        return self._binding

    def outcome(self) -> Outcome:
        return Outcome(success=self._won, score=1.0 if self._won else 0.0,
                       detail={"task_id": self._task_id, "source": self.source})

    def render_state(self) -> str:
        return self._world.signature()

    @preserves_process_state
    def close(self) -> None:
        self._engines.close()
        self._env = None

    # -- extras -------------------------------------------------------------------------
    @property
    def commands_taken(self) -> int:
        """Commands the engine accepted (and acted on) since the last reset."""
        return len(self._commands)

    @preserves_process_state
    def expert_plan(self, from_current_state: bool = False) -> list[str]:
        """The fast-downward planner's ``policy_commands`` for the current game (a separate
        engine plans). With ``from_current_state`` the episode's accepted commands are
        replayed first."""
        task_id = self._require_task()
        if not from_current_state and task_id in self._plans:
            return list(self._plans[task_id])
        plan = planner_commands(self._games[task_id], reset_seed(task_id, self._seed), self.domain_randomization,
                                replay=self._commands if from_current_state else ())
        if not from_current_state and not self.domain_randomization:
            self._plans[task_id] = plan
        return list(plan)

    def _require_task(self) -> str:
        if self._task_id is None:
            raise RuntimeError("reset() the ALFWorld adapter first")
        return self._task_id
