"""How a policy played the held-out ALFWorld games: the counts the main job's diagnosis rests on.

    .venv/bin/python benchmarks/alfworld_held_out_behaviour.py runs/demo-seeds/warm-start \\
        runs/demo-seeds/trca-seed-0 [--json benchmarks/results/NAME.json]

Reads each run folder's ``evaluations/*.jsonl`` (the episodes a held-out evaluation recorded,
facts included) and prints per evaluation (``before``, ``after_warmup``, ``after``):

* successes of episodes, steps in all;
* **loop steps**: steps the ALFWorld observer marked ``repeated`` (the same command as the
  step before) or ``revisited`` (back in a situation seen earlier in the episode: the
  take-put-back-take cycle a cloned policy falls into), the ``repeated_action`` operator's
  condition;
* **wrong-object games**: games in which the policy picked up an object whose class is not the
  task's target class (``facts.picked_up_type`` against ``binding.target_type``);
* of those, the games where an object of the target class had already been in view when the
  wrong one was picked up (``seen_object_types`` of the steps before), i.e. where the policy
  did not look for the target but passed it by.

Nothing here runs a model: it reads what the evaluation wrote, so any number quoted from it in
docs can be recomputed from the run folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rubricgym.jsonl import iter_json_lines


@dataclass(frozen=True)
class EpisodeBehaviour:
    task_id: str
    success: bool
    steps: int
    loop_steps: int
    wrong_object: bool
    wrong_with_target_in_view: bool


@dataclass(frozen=True)
class EvaluationBehaviour:
    run: str
    label: str
    episodes: int
    successes: int
    steps: int
    loop_steps: int
    wrong_object_games: int
    wrong_with_target_in_view: int
    per_episode: list[EpisodeBehaviour]


def episode_behaviour(episode: Mapping[str, Any]) -> EpisodeBehaviour:
    """One recorded episode (a line of ``evaluations/LABEL.jsonl``) as its counts."""
    target = str((episode.get("binding") or {}).get("target_type") or "")
    transitions = list(episode.get("transitions") or [])
    seen: set[str] = set()
    wrong = wrong_in_view = False
    loops = 0
    for transition in transitions:
        facts = transition.get("facts") or {}
        loops += bool(facts.get("repeated") or facts.get("revisited"))
        picked = str(facts.get("picked_up_type") or "")
        if target and picked and picked != target:
            wrong = True
            wrong_in_view = wrong_in_view or target in seen
        seen.update(str(t) for t in facts.get("seen_object_types") or [])
    outcome = episode.get("outcome") or {}
    return EpisodeBehaviour(task_id=str(episode.get("task_id", "")), success=bool(outcome.get("success")),
                            steps=len(transitions), loop_steps=loops, wrong_object=wrong,
                            wrong_with_target_in_view=wrong_in_view)


def evaluation_behaviour(run: str, label: str, episodes: Iterable[Mapping[str, Any]]) -> EvaluationBehaviour:
    rows = [episode_behaviour(e) for e in episodes]
    return EvaluationBehaviour(run=run, label=label, episodes=len(rows), successes=sum(r.success for r in rows),
                               steps=sum(r.steps for r in rows), loop_steps=sum(r.loop_steps for r in rows),
                               wrong_object_games=sum(r.wrong_object for r in rows),
                               wrong_with_target_in_view=sum(r.wrong_with_target_in_view for r in rows),
                               per_episode=rows)


def read_run(folder: Path) -> list[EvaluationBehaviour]:
    """Every evaluation a run folder recorded, in the order before, after_warmup, after."""
    order = {"before": 0, "after_warmup": 1, "after": 2}
    files = sorted((folder / "evaluations").glob("*.jsonl"), key=lambda p: (order.get(p.stem, 3), p.stem))
    if not files:
        raise SystemExit(f"{folder}: no evaluations/*.jsonl (not a run folder, or no evaluation ran)")
    out = []
    for path in files:
        episodes = [episode for _, episode in iter_json_lines(path, what="a recorded episode")]
        out.append(evaluation_behaviour(str(folder), path.stem, episodes))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--json", type=Path, default=None, help="also write the counts here")
    args = parser.parse_args(argv)
    rows = [row for folder in args.runs for row in read_run(folder)]
    for r in rows:
        print(f"{r.run} {r.label}: {r.successes}/{r.episodes} won; loop steps {r.loop_steps} of {r.steps}; "
              f"wrong object in {r.wrong_object_games} games ({r.wrong_with_target_in_view} with the target "
              "already in view)")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
