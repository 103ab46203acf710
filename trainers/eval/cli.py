"""``rubricgym eval``: measure an agent on an env, with where in each episode the rubric paid
or charged; resumable.

    rubricgym eval --env ALFWorld-Rubric-v0 --n 8 --samples 2 --policy endpoint \\
        --base-url http://127.0.0.1:8080/v1 --model smollm2 --concurrency 2 --out runs/eval

The command's options, progress and messages; the policies are ``policies.py``, the worker
processes ``workers.py``, the output folder ``runner.py``, the numbers ``summary.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tqdm.auto import tqdm

from rubricgym.credit.draco import DracoVariant
from rubricgym.judges.config import JudgeSettings
from rubricgym.registration import BenchmarkNotInstalled, check_env_id, task_ids
from rubricgym.secret_refs import refuse_inline_secrets
from rubricgym.tool_surface import tool_surface
from rubricgym.trainers.eval.judge import EvalJudge
from rubricgym.trainers.eval.policies import PolicySpec, intact_checkpoint
from rubricgym.trainers.eval.runner import UnusableResults, run_eval
from rubricgym.trainers.eval.settings import EPISODES_FILE, SUMMARY_FILE, EvalSettings
from rubricgym.trainers.eval.summary import compare_runs
from rubricgym.trainers.preflight import (
    SetupError,
    check_endpoint,
    check_env,
    check_model_name,
    import_callable,
    validation_message,
)


class EvalProgress:
    """A progress bar (stderr) with the running success rate, tokens and cost, and one line per
    finished episode (stdout)."""

    def __init__(self, settings: EvalSettings):
        self.settings = settings
        self.bar: Any = None
        self.counted = self.successes = self.prompt = self.completion = 0

    def __call__(self, record: dict[str, Any], finished: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, desc="eval", unit="episode", file=sys.stderr, dynamic_ncols=True)
        if record["outcome"] != "env_error":  # env failures are reported apart, as in the summary
            self.counted += 1
            self.successes += bool(record["success"])
        self.prompt += int(record["prompt_tokens"])
        self.completion += int(record["completion_tokens"])
        cost = (self.prompt * self.settings.price_prompt_per_mtok
                + self.completion * self.settings.price_completion_per_mtok) / 1e6
        tqdm.write(f"[{finished}/{total}] {record['task_id']} #{record['sample']}: {record['outcome']} "
                   f"return {record['return']:+.3f} in {record['steps']} steps", file=sys.stdout)
        self.bar.update(1)
        self.bar.set_postfix({"success": f"{self.successes / max(1, self.counted):.2f}",
                              "tokens": self.prompt + self.completion, "cost": f"${cost:.4f}"})

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"), help="compare two finished evals: "
                        "per-task differences and an exact McNemar test on their shared (task, sample) pairs")
    parser.add_argument("--env", dest="env_id", help="a registered env id")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of gym.make keyword arguments (e.g. a served "
                        "env: --env rubricgym/Remote-v0 --env-kwargs '{\"url\": \"http://127.0.0.1:8000\"}')")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tasks", help="comma-separated task ids")
    which.add_argument("--n", type=int, help="the env's first N tasks of the split")
    parser.add_argument("--split", choices=("train", "eval"), default="train", help="which tasks --n draws from")
    parser.add_argument("--samples", type=int, default=1, help="episodes per task (pass@k over them)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", choices=("endpoint", "local", "callable", "adapter"))
    parser.add_argument("--base-url", help="policy 'endpoint': OpenAI-compatible endpoint")
    parser.add_argument("--model", default="gpt-4o-mini", help="policy 'endpoint': the model name sent")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the endpoint's key")
    parser.add_argument("--api-key-file", help="file whose first line is the endpoint's key")
    parser.add_argument("--callable", help="policy 'callable': module:function")
    parser.add_argument("--local-model", default="smollm2", help="policy 'local': smollm2, tiny or a model folder")
    parser.add_argument("--adapter", help="policy 'adapter': a training run folder (weights only, pickle-free)")
    parser.add_argument("--native-tools", action="store_true", help="policy 'endpoint': offer the benchmark's tool "
                        "surface (rubricgym.tool_surface) as function-calling tools=")
    parser.add_argument("--timeout", type=float, default=60.0, help="policy 'endpoint': seconds a call may take in all")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=256, help="response tokens per turn")
    parser.add_argument("--max-steps", type=int, help="steps per episode (default: the env's)")
    parser.add_argument("--concurrency", type=int, default=1, help="episodes in flight")
    parser.add_argument("--workers", type=int, help="worker processes (default: one per episode in flight; fewer: "
                        "each plays several episodes at once, their endpoint calls overlapping)")
    parser.add_argument("--out", default="runs/eval")
    parser.add_argument("--resume", action="store_true", help="continue OUT/episodes.jsonl")
    parser.add_argument("--retry-errors", action="store_true", help="with --resume: play again the episodes "
                        "recorded as policy_error or env_error (their records are dropped)")
    parser.add_argument("--dry-run", action="store_true", help="check the env and its data, the settings, the "
                        "policy (a function imported, an endpoint answering) and the output folder; play nothing")
    parser.add_argument("--price-prompt", type=float, default=0.0, help="USD per 1M prompt tokens")
    parser.add_argument("--price-completion", type=float, default=0.0, help="USD per 1M completion tokens")
    judge = parser.add_argument_group("--judge: DRACO verdicts on the episodes (the K samples of a task are one group)")
    judge.add_argument("--judge", action="store_true", help="score every task's samples with a DRACO judge")
    judge.add_argument("--judge-base-url", help="the judge's OpenAI-compatible endpoint")
    judge.add_argument("--judge-model", default="gpt-4o-mini", help="the judge model name sent")
    judge.add_argument("--judge-api-key-env", default="OPENAI_API_KEY", help="variable holding the judge's key")
    judge.add_argument("--judge-api-key-file", help="file whose first line is the judge's key")
    judge.add_argument("--judge-variant", default=DracoVariant.DYNAMIC_CREDIT.value,
                       help=f"one of {[v.value for v in DracoVariant]}")
    judge.add_argument("--judge-rubric", help="static rubric file (default: the benchmark's packaged one)")
    judge.add_argument("--judge-response-format", choices=("json_schema", "json_object_schema", "json_object", "none"),
                       default="json_schema", help="how the judge endpoint is asked for JSON")


def eval_judge(args: argparse.Namespace) -> EvalJudge | None:
    """The ``--judge*`` options as the judge's settings (None without ``--judge``)."""
    if not args.judge:
        return None
    if not args.judge_base_url:
        raise ValueError("--judge needs --judge-base-url (an OpenAI-compatible endpoint)")
    DracoVariant.parse(args.judge_variant)  # an unknown variant is refused before any episode
    settings = JudgeSettings(base_url=args.judge_base_url, model=args.judge_model, api_key_env=args.judge_api_key_env,
                             api_key_file=args.judge_api_key_file, response_format=args.judge_response_format)
    return EvalJudge(settings=settings, variant=args.judge_variant, rubric=args.judge_rubric)


def print_comparison(result: dict[str, Any]) -> None:
    print(f"{'task':40s} {'pairs':>5s} {'A':>6s} {'B':>6s} {'B-A':>6s}")
    for task, row in result["per_task"].items():
        print(f"{task[:40]:40s} {row['pairs']:5d} {row['success_a']:6.2f} {row['success_b']:6.2f} {row['difference']:+6.2f}")
    print(f"{result['pairs']} shared pairs: success A {result['success_a']:.3f}, B {result['success_b']:.3f}; "
          f"only A {result['only_a']}, only B {result['only_b']}; exact McNemar p = {result['mcnemar_p']:.4g}")


FLAGS = {"policy.base_url": "--base-url", "policy.callable": "--callable", "policy.local_model": "--local-model",
         "policy.max_tokens": "--max-tokens", "policy.timeout_s": "--timeout", "price_prompt_per_mtok": "--price-prompt",
         "price_completion_per_mtok": "--price-completion", "env_kwargs": "--env-kwargs"}


def _flag(where: str) -> str:
    """The command-line option a settings field comes from (what the user typed)."""
    return FLAGS.get(where) or "--" + where.rpartition(".")[2].replace("_", "-")


def _env_kwargs(text: str) -> dict[str, Any]:
    try:
        env_kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SetupError(f"--env-kwargs is not JSON ({exc.msg} at character {exc.pos})", text,
                         """pass a JSON object, e.g. --env-kwargs '{"data_path": "/data"}'""") from None
    if not isinstance(env_kwargs, dict):
        raise SetupError("--env-kwargs must be a JSON object", text, """e.g. --env-kwargs '{"data_path": "/data"}'""")
    refuse_inline_secrets(env_kwargs, "--env-kwargs")
    return env_kwargs


def eval_settings(args: argparse.Namespace) -> EvalSettings:
    """The options as settings, every refusal made here, before any folder or worker exists:
    the env id and its data, the settings' values, the policy (a ``module:function`` is
    imported and call-checked here, from the current folder)."""
    env_id = check_env_id(args.env_id)
    env_kwargs = _env_kwargs(args.env_kwargs)
    check_env(env_id, env_kwargs)  # its data, before task_ids builds the env
    if args.tasks:
        tasks = [t for t in args.tasks.split(",") if t]
    else:
        available = list(task_ids(env_id, split=args.split, **env_kwargs))
        tasks = available[: args.n] if args.n else available
    try:
        settings = EvalSettings(
            env_id=env_id, env_kwargs=env_kwargs, tasks=tasks, samples=args.samples, seed=args.seed,
            concurrency=args.concurrency, workers=args.workers, max_steps=args.max_steps, out=args.out,
            resume=args.resume, retry_errors=args.retry_errors, price_prompt_per_mtok=args.price_prompt,
            price_completion_per_mtok=args.price_completion,
            policy=PolicySpec(kind=args.policy, base_url=args.base_url, model=args.model, api_key_env=args.api_key_env,
                              api_key_file=args.api_key_file, callable=args.callable, local_model=args.local_model,
                              adapter=args.adapter, native_tools=args.native_tools, timeout_s=args.timeout,
                              temperature=args.temperature, max_tokens=args.max_tokens),
            judge=eval_judge(args))
    except ValidationError as exc:
        raise SetupError(validation_message(exc, _flag), None, "see rubricgym eval --help") from None
    if settings.policy.native_tools:
        tool_surface(env_id, **env_kwargs)  # a benchmark without a tool surface is refused here
    if settings.policy.kind == "callable":
        import_callable(settings.policy.callable)  # a missing module or function: refused, not N failed episodes
    return settings


def dry_run(settings: EvalSettings) -> list[str]:
    """What a run would use, each piece checked without loading a model or playing an episode:
    the endpoints answer, the model is there, the output folder can take the results."""
    policy = settings.policy
    lines = [f"env {settings.env_id}: {len(settings.tasks)} task(s) x {settings.samples} sample(s), its data present"]
    if policy.kind == "endpoint":
        check_endpoint(str(policy.base_url), "--base-url")
        lines.append(f"policy endpoint {policy.base_url}: a server answers")
    elif policy.kind == "local":
        check_model_name(policy.local_model, "--local-model")
        lines.append(f"policy local {policy.local_model}: found (not loaded)")
    elif policy.kind == "adapter":
        if not Path(str(policy.adapter)).is_dir():
            raise SetupError("--adapter is not a folder", policy.adapter, "name a rubricgym train run folder")
        lines.append(f"policy adapter {policy.adapter}: a folder (its checkpoint is verified when the run starts)")
    else:
        lines.append(f"policy callable {policy.callable}: imported, takes the chat messages")
    if settings.judge is not None:
        check_endpoint(str(settings.judge.settings.base_url), "--judge-base-url")
        lines.append(f"judge {settings.judge.settings.base_url}: a server answers")
    episodes = Path(settings.out) / EPISODES_FILE
    if episodes.exists() and not settings.resume:
        raise SetupError(f"{episodes} exists", settings.out, "pass --resume to continue it, or another --out")
    lines.append(f"results: {settings.out} ({'resumed' if episodes.exists() else 'new'})")
    return lines


def run(args: argparse.Namespace) -> int:
    if args.compare:
        try:
            print_comparison(compare_runs(Path(args.compare[0]), Path(args.compare[1])))
        except (OSError, ValueError, KeyError) as exc:  # folders and records are untrusted input
            print(f"rubricgym eval: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.env_id or not args.policy:
        print("rubricgym eval: --env and --policy are required (or --compare DIR_A DIR_B)", file=sys.stderr)
        return 2
    if args.dry_run:
        sys.dont_write_bytecode = True  # a dry run writes nothing, not even the agent module's __pycache__
    try:
        settings = eval_settings(args)
        if args.dry_run:
            for line in dry_run(settings):
                print(f"rubricgym eval --dry-run: {line}")
            print("rubricgym eval --dry-run: ready; nothing was played or written")
            return 0
        if settings.policy.kind == "adapter":
            intact_checkpoint(Path(str(settings.policy.adapter)))  # refused here, not in every worker
    except (ValueError, LookupError, BenchmarkNotInstalled) as exc:  # bad settings, an unknown env id, missing data
        print(f"rubricgym eval: {exc}", file=sys.stderr)
        return 2
    return play(settings)


def play(settings: EvalSettings) -> int:
    """Run the eval with its progress bar; the summary line, or why it stopped."""
    progress = EvalProgress(settings)
    try:
        summary = run_eval(settings, progress, notice=lambda text: print(f"rubricgym eval: {text}", file=sys.stderr))
    except (FileExistsError, UnusableResults) as exc:  # an output folder that cannot be (re)used: what and where
        print(f"rubricgym eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rubricgym eval: interrupted; the finished episodes are in {Path(settings.out) / EPISODES_FILE} "
              "(--resume plays the rest)", file=sys.stderr)
        return 130
    finally:
        progress.close()
    most = str(max((int(k) for k in summary["pass_at"]), default=1))
    print(f"success {summary['success_rate']:.3f} over {summary['counted']} episodes (pass@{most} "
          f"{summary['pass_at'].get(most, math.nan):.3f}); outcomes {summary['outcomes']}; tokens {summary['prompt_tokens']}+"
          f"{summary['completion_tokens']}; results: {Path(settings.out) / EPISODES_FILE}, {SUMMARY_FILE}")
    return 0
