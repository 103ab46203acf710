"""``rubricgym demo``: play a benchmark's expert on its env and show each step's facts.

The policy is scripted: the benchmark's expert player (its spec's ``expert``), with a
malformed response, an unknown command and a repeated command mixed in so Invalidity
facts show up next to Evidence and Execution ones. Runs offline on the real engine.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from rubricgym.parsing import ExpertAction, TagGrammar
from rubricgym.records import step_records
from rubricgym.registration import UnknownBenchmark, check_env_id, env_ids, get_spec

DEFAULT_GAMES = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", help="env id to play (without it: the registered ids)")
    parser.add_argument("--games", type=int, default=None,
                        help=f"how many tasks to play (default: every task, at most {DEFAULT_GAMES})")
    parser.add_argument("--max-steps", type=int, default=None, help="step budget (default: the benchmark's)")
    parser.add_argument("--seed", type=int, default=0, help="picks the tasks and seeds the resets")
    parser.add_argument("--kwargs", default="{}", help="JSON object of env keyword arguments, e.g. "
                        "'{\"data_path\": \"/data/official\"}'")
    parser.add_argument("--plain", action="store_true", help="plain text instead of rich tables")


def scripted_responses(grammar: TagGrammar, plan: Sequence[str | ExpertAction]) -> list[str]:
    """The expert's actions with three deliberate mistakes after the first step."""
    first, rest = (plan[0], plan[1:]) if plan else (None, [])
    mistakes = [
        "I think I should do something now.",  # no action tag: parse failure
        grammar.render("go to the moon"),  # parses, but no engine knows it
        grammar.render("go to the moon"),  # same command, same state: repeated
    ]
    return ([grammar.render(first)] if first is not None else []) + mistakes + [grammar.render(a) for a in rest]


def _non_default(facts: Any) -> dict[str, Any]:
    defaults = type(facts)()
    return {k: v for k, v in facts.model_dump().items() if v != getattr(defaults, k)}


class _Printer:
    def __init__(self, plain: bool):
        self.console = None if plain else Console(highlight=False)

    def header(self, text: str) -> None:
        if self.console:
            self.console.print(Rule(f"[bold]{text}"))
        else:
            print(f"\n=== {text} ===")

    def line(self, text: str, style: str = "") -> None:
        if self.console:
            self.console.print(Text(text, style=style))
        else:
            print(text)

    def step(self, index: int, response: str, transition: Any, reward: float, info: dict[str, Any]) -> None:
        facts = _non_default(transition.facts)
        reward_text = _reward_text(reward, info)
        action = transition.action.action if transition.action.ok else f"<unparsed: {transition.action.error.value}>"
        if self.console:
            table = Table(show_header=False, box=None, padding=(0, 1))
            table.add_column(style="cyan", no_wrap=True)
            table.add_column()
            table.add_row("response", response)
            table.add_row("observation", transition.observation)
            for key, value in facts.items():
                table.add_row(f"  {key}", str(value))
            table.add_row("reward", reward_text)
            self.console.print(f"[bold]step {index}[/bold] > [green]{action}[/green]")
            self.console.print(table)
        else:
            print(f"step {index} > {action}\n  observation: {transition.observation}")
            for key, value in facts.items():
                print(f"    {key} = {value}")
            print(f"  reward: {reward_text}")


def _reward_text(reward: float, info: dict[str, Any]) -> str:
    """The step reward with what it is made of: the engine's and each rubric component's."""
    parts = [f"engine {info.get('env_reward', reward):g}"]
    parts += [f"{name} {record.reward:g}" for name, record in step_records(info).components.items()]
    return f"{reward:g} ({', '.join(parts)})" if len(parts) > 1 else f"{reward:g}"


def run(args: argparse.Namespace) -> int:
    if not args.env:
        print(f"rubricgym demo: choose an env with --env; registered: {', '.join(sorted(env_ids()))}")
        return 2
    try:
        spec = get_spec(check_env_id(args.env))
        kwargs: dict[str, Any] = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("--kwargs must be a JSON object")
    except (UnknownBenchmark, ValueError) as exc:
        print(f"rubricgym demo: {exc}")
        return 2
    expert = spec.load_expert()
    if expert is None:
        print(f"rubricgym demo: {spec.name} declares no expert player to demonstrate")
        return 2
    # the benchmark's own rubric, so each step shows what it paid or charged
    reward = "default" if spec.operator_library is not None else "none"
    env = gym.make(args.env, reward=reward, max_steps=args.max_steps, **kwargs)
    out = _Printer(args.plain)
    try:
        adapter = env.unwrapped.adapter
        task_ids = list(adapter.task_ids())
        games = min(len(task_ids), DEFAULT_GAMES) if args.games is None else args.games
        chosen = random.Random(args.seed).sample(task_ids, min(max(0, games), len(task_ids)))
        out.line(f"{spec.name} demo on {args.env}: {len(chosen)} task(s), scripted expert with deliberate mistakes")
        wins = 0
        for n, task_id in enumerate(chosen, 1):
            obs, info = env.reset(seed=args.seed, options={"task_id": task_id})
            out.header(f"task {n}: {task_id}")
            out.line(obs)
            out.line(f"binding: {info['binding'].model_dump()}", style="magenta")
            for i, response in enumerate(scripted_responses(adapter.grammar, expert(adapter))):
                obs, reward, terminated, truncated, info = env.step(response)
                out.step(i, response, info["transition"], reward, info)
                if terminated or truncated:
                    break
            success = bool(info["outcome"].success) if "outcome" in info else False
            wins += success
            out.line(f"outcome: success={success} after {info['transition'].step + 1} steps",
                     style="bold green" if success else "bold red")
        out.line(f"\n{wins}/{len(chosen)} tasks won by the scripted expert")
        return 0 if wins == len(chosen) else 1
    finally:
        env.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="rubricgym demo", description=__doc__)
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
