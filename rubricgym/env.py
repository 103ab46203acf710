"""``RubricEnv``: a real ``gymnasium.Env`` over any adapter, emitting typed transitions."""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym

from rubricgym.adapter import Adapter, EngineFailure, EngineState, EngineStep, PolicyFailure
from rubricgym.contract import Outcome, ParsedAction, Trajectory, Transition
from rubricgym.parsing import parse_response
from rubricgym.untrusted import clean_text
from rubricgym.spaces import UnicodeText

log = logging.getLogger(__name__)

__all__ = ["MAX_TEXT", "RubricEnv"]

MAX_TEXT = 1 << 20


class RubricEnv(gym.Env[str, str]):
    """Text observation in, text response out; ``info["transition"]`` holds the step's facts.

    The step reward is the engine's own (sparse) reward; reward wrappers add rubric rewards.
    ``self.trajectory`` accumulates the episode for group credit and re-scoring. ``max_steps``
    truncates the episode (``gym.make`` passes the benchmark spec's unless you give one).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, adapter: Adapter, max_steps: int, render_mode: str | None = None):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.adapter = adapter
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.observation_space = UnicodeText(MAX_TEXT)
        self.action_space = UnicodeText(adapter.grammar.max_chars)
        self.trajectory: Trajectory | None = None
        self._state: EngineState | None = None
        self._seen_entities: set[str] = set()
        self._last_action: tuple[str, str] | None = None  # (action, signature it was issued in)
        self._done = False

    @property
    def task_ids(self) -> list[str]:
        """The tasks ``reset(options={"task_id": ...})`` accepts, in a stable order."""
        return list(self.adapter.task_ids())

    # -- gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        tasks = self.task_ids
        if not tasks:
            raise RuntimeError(f"{self.adapter.benchmark}: no tasks available")
        task_id = options.get("task_id")
        if task_id is None:
            task_id = tasks[int(self.np_random.integers(len(tasks)))]
        elif task_id not in tasks:
            raise ValueError(f"{self.adapter.benchmark}: unknown task_id {task_id!r}")
        engine_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        start = self.adapter.reset(task_id, engine_seed)
        cleaned = {"observation": clean_text(start.observation), "instruction": clean_text(start.instruction)}
        if any(cleaned[k] is not getattr(start, k) for k in cleaned):  # the engine's text is untrusted too
            start = start.model_copy(update=cleaned)
        self._state = start
        self._seen_entities = set(start.entities)
        self._last_action = None
        self._done = False
        binding = self.adapter.binding()
        self.trajectory = Trajectory(
            benchmark=self.adapter.benchmark,
            task_id=task_id,
            seed=seed,
            instruction=start.instruction,
            binding=binding.model_dump(mode="json"),
            initial_observation=start.observation,
        )
        info = {
            "task_id": task_id,
            "instruction": start.instruction,
            "binding": binding,
            "admissible_actions": start.admissible_actions,
            **start.info,
        }
        return start.observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None or self.trajectory is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:
            raise gym.error.ResetNeeded("episode is over; call reset()")
        action = clean_text(action) if isinstance(action, str) else action  # untrusted: it must stay writable
        parsed = parse_response(action, self.adapter.grammar)
        prev = self._state
        failure: str | None = None  # an environment failure: not the policy's doing
        broke: str | None = None  # a policy failure: the action's content broke the engine
        if parsed.ok:
            try:
                result = self.adapter.step(parsed)
            except PolicyFailure as exc:
                result, broke = self._ended_step(prev, str(exc), True, exc.facts), str(exc)
            except EngineFailure as exc:
                result, failure = self._ended_step(prev, str(exc), False), f"environment failure: {exc}"
            except Exception as exc:  # an engine bug must not look like a policy failure
                log.exception("%s engine raised", self.adapter.benchmark)
                result = self._ended_step(prev, f"{type(exc).__name__}: {exc}", False)
                failure = f"environment failure: {type(exc).__name__}: {exc}"
        else:
            result = self.adapter.invalid_step(parsed, prev)

        if clean_text(result.observation) is not result.observation:  # the engine's text, as untrusted as the agent's
            result = result.model_copy(update={"observation": clean_text(result.observation)})
        step_index = len(self.trajectory.transitions)
        if step_index + 1 >= self.max_steps and not result.terminated:
            result = result.model_copy(update={"truncated": True})
        transition = self._transition(step_index, action, parsed, prev, result, failure, broke is not None)
        self.trajectory.transitions.append(transition)
        self._state = result
        self._done = result.terminated or result.truncated
        if parsed.ok:
            self._last_action = (parsed.action, prev.state_signature)
        if self._done and broke is not None:  # the engine cannot be asked: the episode failed
            self.trajectory.outcome = Outcome(success=False, score=0.0, detail={"policy_failure": broke})
        elif self._done:
            self.trajectory.outcome = self.adapter.outcome() if failure is None else self.trajectory.outcome
        info = {
            "transition": transition,
            "admissible_actions": result.admissible_actions,
            **({"environment_failure": True, "error": failure} if failure else {}),
            **({"policy_failure": broke} if broke else {}),
            **result.info,
        }
        if self._done:
            info["outcome"] = self.trajectory.outcome
            info["trajectory"] = self.trajectory  # the whole episode, for episode-level rewards
        return result.observation, float(result.reward), bool(result.terminated), bool(result.truncated), info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self.trajectory is None:
            return ""
        if not self.trajectory.transitions:
            return self.trajectory.initial_observation
        t = self.trajectory.transitions[-1]
        return f"[step {t.step}] > {t.action.action or '<invalid>'}\n{t.observation}"

    def close(self) -> None:
        self.adapter.close()
        super().close()

    # -- shared fact derivation ----------------------------------------------------------
    @staticmethod
    def _ended_step(prev: EngineState, message: str, by_action: bool,
                    facts: dict[str, Any] | None = None) -> EngineStep:
        """The step of a broken engine: the action broke it (a policy failure: the episode is
        over, ``terminated``) or something else did (an environment failure: ``truncated``)."""
        return EngineStep(
            observation=(f"Your action broke the environment: {message}. The episode is over." if by_action
                         else f"The environment failed: {message}"),
            state_signature=prev.state_signature,
            context_key=prev.context_key,
            accepted=False,
            terminated=by_action,
            truncated=not by_action,
            error_text=message,
            benchmark_facts=facts or {},
        )

    def _transition(
        self,
        step: int,
        response: str,
        parsed: ParsedAction,
        prev: EngineState,
        result: EngineStep,
        failure: str | None,
        broke_engine: bool = False,
    ) -> Transition:
        admissible = self.adapter.is_admissible(parsed.action, prev) if parsed.ok and parsed.action else None
        new_entities = [e for e in dict.fromkeys(result.entities) if e not in self._seen_entities]
        self._seen_entities.update(new_entities)
        facts = self.adapter.facts_model(
            parsed=parsed.ok,
            parse_error=parsed.error.value if parsed.error else None,
            admissible=admissible,
            accepted=parsed.ok and result.accepted and failure is None,
            rejected=not (parsed.ok and result.accepted) and failure is None,
            error_text=result.error_text,
            repeated=parsed.ok and self._last_action == (parsed.action, prev.state_signature),
            state_changed=result.state_signature != prev.state_signature,
            new_entities=new_entities,
            episode_done=result.terminated or result.truncated,
            broke_engine=broke_engine,
            **result.benchmark_facts,
        )
        return Transition(
            benchmark=self.adapter.benchmark,
            step=step,
            response=response if isinstance(response, str) else repr(response),
            action=parsed,
            observation=result.observation,
            facts=facts,
            context_key=prev.context_key,
            env_reward=float(result.reward),
            terminated=result.terminated,
            truncated=result.truncated,
            error=failure,
        )
