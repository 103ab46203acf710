"""``rubricgym demo``: play bundled ALFWorld games and show each step's facts.

The policy is scripted: the planner's expert plan, with a malformed response, an
inadmissible command and a repeated command mixed in so Invalidity facts show up next to
Evidence and Execution ones. Runs offline on the real engine.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

DEFAULT_GAMES = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--games", type=int, default=DEFAULT_GAMES, help="how many games to play")
    parser.add_argument("--split", choices=["train", "eval"], default="train")
    parser.add_argument("--seed", type=int, default=0, help="picks the games and seeds the resets")
    parser.add_argument("--data-path", default=None, help="official-format ALFWorld data (default: bundled games)")
    parser.add_argument("--plain", action="store_true", help="plain text instead of rich tables")


def scripted_responses(plan: list[str]) -> list[str]:
    """The expert plan with three deliberate mistakes after the first step."""
    wrap = lambda c: f"<think>following the plan</think><action>{c}</action>"  # noqa: E731
    mistakes = [
        "I think I should go to the fridge now.",  # no <action> tag: parse failure
        wrap("go to the moon"),  # parses, but the engine answers "Nothing happens."
        wrap("look"),
        wrap("look"),  # same command, same state: repeated
    ]
    return [wrap(plan[0])] + mistakes + [wrap(c) for c in plan[1:]]


def _non_default(facts: Any) -> dict[str, Any]:
    defaults = type(facts)()
    return {k: v for k, v in facts.model_dump().items() if v != getattr(defaults, k)}


class _Printer:
    def __init__(self, plain: bool):
        self.console = None
        if not plain:
            try:
                from rich.console import Console

                self.console = Console(highlight=False)
            except ImportError:
                pass

    def header(self, text: str) -> None:
        if self.console:
            from rich.rule import Rule

            self.console.print(Rule(f"[bold]{text}"))
        else:
            print(f"\n=== {text} ===")

    def line(self, text: str, style: str = "") -> None:
        if self.console:
            from rich.text import Text

            self.console.print(Text(text, style=style))
        else:
            print(text)

    def step(self, index: int, response: str, transition: Any, reward: float) -> None:
        facts = _non_default(transition.facts)
        action = transition.action.action if transition.action.ok else f"<unparsed: {transition.action.error.value}>"
        if self.console:
            from rich.table import Table

            table = Table(show_header=False, box=None, padding=(0, 1))
            table.add_column(style="cyan", no_wrap=True)
            table.add_column()
            table.add_row("response", response)
            table.add_row("observation", transition.observation)
            for key, value in facts.items():
                table.add_row(f"  {key}", str(value))
            table.add_row("reward", f"{reward:g}")
            self.console.print(f"[bold]step {index}[/bold] > [green]{action}[/green]")
            self.console.print(table)
        else:
            print(f"step {index} > {action}\n  observation: {transition.observation}")
            for key, value in facts.items():
                print(f"    {key} = {value}")
            print(f"  reward: {reward:g}")


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the env ids)

    env_id = "ALFWorld-Rubric-v0" if args.split == "train" else "ALFWorld-Rubric-Eval-v0"
    kwargs: dict[str, Any] = {"reward": "none"}
    if args.data_path:
        kwargs["data_path"] = args.data_path
    env = gym.make(env_id, max_steps=60, **kwargs)
    out = _Printer(args.plain)
    try:
        adapter = env.unwrapped.adapter
        task_ids = list(adapter.task_ids())
        by_type: dict[str, list[str]] = {}
        for task_id in task_ids:
            by_type.setdefault(task_id.split("-", 1)[0], []).append(task_id)
        rng = random.Random(args.seed)
        order = sorted(by_type)
        rng.shuffle(order)
        chosen = [rng.choice(by_type[t]) for t in order][: max(0, args.games)]
        out.line(f"ALFWorld demo: {len(chosen)} game(s) from the {adapter.source} {args.split} split")
        wins = 0
        for n, task_id in enumerate(chosen, 1):
            obs, info = env.reset(seed=args.seed, options={"task_id": task_id})
            out.header(f"game {n}: {task_id}")
            out.line(obs)
            out.line(f"binding: {info['binding'].model_dump()}", style="magenta")
            plan = adapter.expert_plan()
            for i, response in enumerate(scripted_responses(plan)):
                obs, reward, terminated, truncated, info = env.step(response)
                out.step(i, response, info["transition"], reward)
                if terminated or truncated:
                    break
            outcome = env.unwrapped.trajectory.outcome
            wins += bool(outcome.success)
            out.line(f"outcome: success={outcome.success} after {env.unwrapped.trajectory.num_steps} steps",
                     style="bold green" if outcome.success else "bold red")
        out.line(f"\n{wins}/{len(chosen)} games won by the scripted policy")
        return 0 if wins == len(chosen) else 1
    finally:
        env.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="rubricgym demo", description=__doc__)
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
