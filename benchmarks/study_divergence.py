"""Where the runs of a matched study part ways: per seed and iteration, whether each estimator
sampled the same responses as the first estimator listed, how far each run's final LoRA
weights are from that estimator's (max |difference|, next to the largest weight itself), and how
far RL moved each run's weights from its first checkpoint (after any warm start).

A matched study gives every estimator of a seed the same first batch and the same sampling
seeds, so two runs sample the same tokens until their updates have moved the policy far
enough to flip one; this says when (and whether) that happened.

    python benchmarks/study_divergence.py runs/study-alfworld-cpu [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rubricgym.atomic_files import atomic_write_json


def responses(run: Path) -> dict[int, list[tuple[str, ...]]]:
    """Iteration -> each rollout's responses, in file order."""
    out = {}
    for path in sorted((run / "trajectories").glob("iter-*.jsonl")):
        iteration = int(path.stem.split("-")[-1])
        out[iteration] = [tuple(s["response"] for s in t["transitions"])
                          for t in map(json.loads, path.read_text().splitlines())]
    return out


def adapters(run: Path) -> tuple[dict, dict]:
    """(first, last) checkpoint's LoRA weights: before RL (after any warm start) and final."""
    from safetensors.torch import load_file

    checkpoints = sorted(run.glob("checkpoint-*/adapter/adapter_model.safetensors"))
    if not checkpoints:
        return {}, {}
    return load_file(str(checkpoints[0])), load_file(str(checkpoints[-1]))


def max_abs_difference(a: dict, b: dict) -> float | None:
    return max((float((a[k] - b[k]).abs().max()) for k in b if k in a), default=None)


def divergence(study: Path) -> dict:
    from rubricgym.trainers.run_files import parse_seed_run_name

    runs: dict[int, dict[str, Path]] = defaultdict(dict)
    for run in sorted((study / "runs").iterdir()):
        named = parse_seed_run_name(run.name)
        if named and run.is_dir():
            estimator, seed = named
            runs[seed][estimator] = run
    summary = study / "summary.json"  # written when the study ends; before that, names in order
    order = (json.loads(summary.read_text())["settings"]["estimators"] if summary.is_file()
             else sorted({e for by in runs.values() for e in by}))
    report: dict = {"reference": order[0], "seeds": {}}
    for seed, by_estimator in sorted(runs.items()):
        reference = by_estimator.get(order[0])
        if reference is None:
            continue
        ref_responses, (_, ref_adapter) = responses(reference), adapters(reference)
        largest = max((float(t.abs().max()) for t in ref_adapter.values()), default=0.0)
        rows = {}
        for estimator in order:
            run = by_estimator.get(estimator)
            if run is None:
                continue
            mine, (start, adapter) = responses(run), adapters(run)
            rows[estimator] = {
                "same_responses_by_iteration": {str(i): mine.get(i) == ref_responses[i] for i in sorted(ref_responses)},
                "adapter_max_abs_difference": max_abs_difference(adapter, ref_adapter),
                "rl_update_max_abs": max_abs_difference(adapter, start),  # how far RL moved this run
            }
        report["seeds"][str(seed)] = {"adapter_max_abs_weight": largest, "estimators": rows}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path, help="a rubricgym study --output-dir")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    report = divergence(args.study)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        atomic_write_json(args.json, report)


if __name__ == "__main__":
    main()
