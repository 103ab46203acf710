"""``rubricgym judge``: score stored trajectories without re-running the environment.

Trajectories (JSON lines of ``rubricgym.contract.Trajectory``) are grouped by task id (in
file order; ``--group-size`` splits large groups), each group is scored with
``DracoJudge.score_group``, and one JSON line per group is written with criteria, surviving
mask, and per-rollout R_i, A_i, verdicts, citations and p/f counts. A ledger (calls,
tokens, cache hits, cost per phase) goes next to it. The API key is read from an
environment variable (``--api-key-env``), never from the command line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import OrderedDict
from pathlib import Path

from rubricgym.atomic_files import atomic_write_text
from rubricgym.contract import Trajectory, load_jsonl
from rubricgym.credit.draco import DracoVariant
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.pipeline import DracoJudge
from rubricgym.judges.rubric import load_rubric
from rubricgym.registration import judge_rubric_file
from rubricgym.secret_refs import redact

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trajectories", help="JSON-lines file of stored trajectories")
    parser.add_argument("--out", required=True, help="results JSON-lines file (one line per group)")
    parser.add_argument("--ledger", help="ledger JSON (default: <out>.ledger.json)")
    parser.add_argument("--variant", default="static/credit", help=f"one of {[v.value for v in DracoVariant]} or 'full'")
    parser.add_argument("--rubric", help="static rubric file, or a benchmark whose packaged one to use (default: the trajectories')")
    parser.add_argument("--group-size", type=int, default=None, help="split each task's trajectories into groups of N")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: RUBRICGYM_JUDGE_BASE_URL)")
    parser.add_argument("--model", help="judge model name (default: RUBRICGYM_JUDGE_MODEL)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--api-key-file", help="file whose first line is the API key (instead of --api-key-env)")
    parser.add_argument("--response-format", choices=["json_schema", "json_object_schema", "json_object", "none"])
    parser.add_argument("--cache-dir", help="persistent response cache directory")
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--timeout", type=float, help="seconds per HTTP call")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--max-criteria", type=int)
    parser.add_argument("--no-reasons", action="store_true", help="do not ask for a reason per verdict")


def _settings(args: argparse.Namespace) -> JudgeSettings:
    overrides = {
        "base_url": args.base_url,
        "model": args.model,
        "response_format": args.response_format,
        "cache_dir": args.cache_dir,
        "concurrency": args.concurrency,
        "timeout_s": args.timeout,
        "temperature": args.temperature,
        "max_criteria": args.max_criteria,
    }
    kwargs = {k: v for k, v in overrides.items() if v is not None}
    if args.no_reasons:
        kwargs["ask_reasons"] = False
    kwargs["api_key_env"] = args.api_key_env
    if args.api_key_file:
        kwargs["api_key_file"] = args.api_key_file
    return JudgeSettings(**kwargs)


def group_trajectories(trajs: list[Trajectory], group_size: int | None) -> list[tuple[str, list[Trajectory]]]:
    by_task: OrderedDict[str, list[Trajectory]] = OrderedDict()
    for t in trajs:
        by_task.setdefault(t.task_id, []).append(t)
    groups = []
    for task_id, members in by_task.items():
        size = group_size or len(members)
        for start in range(0, len(members), size):
            groups.append((task_id, members[start : start + size]))
    return groups


def run(args: argparse.Namespace) -> int:
    try:
        variant = DracoVariant.parse(args.variant)
        trajs = load_jsonl(args.trajectories)
    except (OSError, ValueError, RecursionError) as exc:  # a trajectory file is untrusted input
        print(f"rubricgym judge: {redact(str(exc))}", file=sys.stderr)
        return 2
    if args.group_size is not None and args.group_size < 1:
        print("rubricgym judge: --group-size must be >= 1", file=sys.stderr)
        return 2
    if not trajs:
        print("rubricgym judge: no trajectories in the file", file=sys.stderr)
        return 2
    try:
        rubric = load_rubric(judge_rubric_file(args.rubric or trajs[0].benchmark))
        settings = _settings(args)
    except (OSError, ValueError, LookupError) as exc:
        print(f"rubricgym judge: {redact(str(exc))}", file=sys.stderr)
        return 2
    judge = DracoJudge.from_settings(settings, static_rubric=rubric)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ledger_path = Path(args.ledger) if args.ledger else out.with_name(out.name + ".ledger.json")
    groups = group_trajectories(trajs, args.group_size)
    lines: list[str] = []
    verdicts = unanswered = failed = 0
    try:
        for g, (task_id, members) in enumerate(groups):
            try:
                result = judge.score_group(members[0].instruction, members, variant, training_step=None)
            except Exception as exc:  # a bug, not a bad reply (those are unanswered verdicts): recorded, not fatal
                failed += 1
                log.exception("scoring group %d (%s) failed", g, task_id)
                lines.append(json.dumps({"task_id": task_id, "group": g, "error": f"{type(exc).__name__}: {exc}"[:500]}))
                print(f"[{g + 1}/{len(groups)}] {task_id}: failed ({type(exc).__name__})", file=sys.stderr)
                continue
            lines.append(json.dumps({"task_id": task_id, "group": g, **result.model_dump(mode="json")},
                                    ensure_ascii=False))
            verdicts += sum(len(r.verdicts) for r in result.rollouts)
            unanswered += sum(r.unanswered for r in result.rollouts)
            rewards = ", ".join(f"{r:+.2f}" for r in result.rewards)
            print(f"[{g + 1}/{len(groups)}] {task_id}: {len(members)} rollouts, "
                  f"{sum(result.surviving)}/{len(result.criteria)} criteria survive, R = [{rewards}]")
    finally:  # even when interrupted: the groups scored so far and what they cost
        atomic_write_text(out, "".join(line + "\n" for line in lines))
        judge.ledger.write(ledger_path)
    total = judge.ledger.summary()["total"]
    print(f"wrote {out} and {ledger_path}: {len(lines)}/{len(groups)} groups, {total['calls']} calls, "
          f"{total['cache_hits']} cache hits, {total['prompt_tokens']}+{total['completion_tokens']} tokens "
          f"(${total['cost_usd']:.4f} at RUBRICGYM_JUDGE_PRICE_*_PER_MTOK), "
          f"{unanswered}/{verdicts} verdicts unanswered")
    if failed:
        print(f"rubricgym judge: {failed} group(s) could not be scored (see 'error' in the results)", file=sys.stderr)
        return 1
    if verdicts and unanswered == verdicts:
        print("rubricgym judge: the judge answered nothing (see the errors in the results); check the server",
              file=sys.stderr)
        return 1
    return 0
