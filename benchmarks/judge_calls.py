"""Judge cost of one DRACO group (G = 6 by default): calls, tokens and cache hits per stage,
and the share of each stage's prompt that is a common prefix across the group's calls
(prompts put the shared part first, so a server with prefix caching reuses it), in
characters and in tokens of the judge's chat template (target for score calls: >= 60%).

    .venv/bin/python benchmarks/judge_calls.py                 # real llama-cpp-python server + SmolLM2
    .venv/bin/python benchmarks/judge_calls.py --scripted      # loopback scripted server (seconds)
    .venv/bin/python benchmarks/judge_calls.py --base-url http://127.0.0.1:8080/v1 --model m

The group is recorded on the real ALFWorld engine (expert, detour, random rollouts). The
group is judged twice with the same cache directory: the second pass must make no call;
the wall-time ratio pass1/pass2 is printed (measured in the same run, never asserted).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "judges"))  # the test servers and the ALFWorld recorder

from rubricgym.atomic_files import atomic_write_json  # noqa: E402
from rubricgym.judges import ChatReply, ChatRequest, DracoJudge, JudgeSettings, OpenAIChatBackend  # noqa: E402


class RecordingBackend:
    """Delegates to a real backend and keeps every request it sends (cache misses only)."""

    def __init__(self, inner: OpenAIChatBackend):
        self.inner = inner
        self.max_concurrency = inner.max_concurrency
        self.enforces_schema = inner.enforces_schema
        self.requests: list[ChatRequest] = []

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def complete(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        return self.inner.complete(request)


def prompt_text(request: ChatRequest) -> str:
    return "".join(f"<{m['role']}>\n{m['content']}\n" for m in request.messages)


def common_prefix_len(texts: list) -> int:
    """Length of the longest common prefix of strings or token-id lists."""
    if not texts:
        return 0
    first = texts[0]
    n = len(first)
    for t in texts[1:]:
        i = 0
        limit = min(n, len(t))
        while i < limit and first[i] == t[i]:
            i += 1
        n = i
    return n


def load_tokenizer(name: str) -> tuple[Any, str | None]:
    """The judge model's tokenizer (SmolLM2's by default), or (None, why not)."""
    try:
        from transformers import AutoTokenizer

        from rubricgym.models import smollm2_path

        return AutoTokenizer.from_pretrained(str(smollm2_path()) if name == "smollm2" else name), None
    except Exception as exc:  # transformers or the model package missing: characters only
        return None, f"{type(exc).__name__}: {exc}"


def stage_report(requests: list[ChatRequest], tokenizer: Any = None) -> dict[str, Any]:
    """Per phase: mean prompt size and the common prefix of the group's prompts, in
    characters of the messages and in tokens of the chat template the server applies."""
    by_phase: dict[str, list[ChatRequest]] = {}
    for r in requests:
        by_phase.setdefault(r.phase, []).append(r)
    out = {}
    for phase, reqs in by_phase.items():
        texts = [prompt_text(r) for r in reqs]
        prefix = common_prefix_len(texts) if len(texts) > 1 else 0
        mean_len = sum(map(len, texts)) / len(texts)
        row: dict[str, Any] = {
            "requests": len(texts),
            "mean_prompt_chars": round(mean_len),
            "common_prefix_chars": prefix,
            "common_prefix_share": round(prefix / mean_len, 3) if len(texts) > 1 else None,
        }
        if tokenizer is not None:
            chats = [tokenizer.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True) for r in reqs]
            ids = [tokenizer(chat, add_special_tokens=False)["input_ids"] for chat in chats]
            tokens = common_prefix_len(ids) if len(ids) > 1 else 0
            mean_tokens = sum(map(len, ids)) / len(ids)
            row |= {
                "mean_prompt_tokens": round(mean_tokens),
                "common_prefix_tokens": tokens,
                "common_prefix_share_tokens": round(tokens / mean_tokens, 3) if len(ids) > 1 else None,
            }
        out[phase] = row
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group-size", type=int, default=6)
    ap.add_argument("--variant", default="full")
    ap.add_argument("--scripted", action="store_true", help="loopback scripted server instead of a model")
    ap.add_argument("--base-url")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--tokenizer", default="smollm2", help="tokenizer for the prefix share in tokens")
    ap.add_argument("--json", help="write the report here too")
    args = ap.parse_args()

    from judge_test_servers import LlamaServer, ScriptedJudgeServer
    from judge_trajectories import record_alfworld_group

    instruction, trajs = record_alfworld_group(args.group_size, max_steps=args.max_steps)
    server: Any = None
    if args.base_url:
        base_url, model = args.base_url, args.model
    elif args.scripted:
        server, model = ScriptedJudgeServer(), "scripted"
        base_url = server.base_url
    else:
        server, model = LlamaServer(), "smollm2"
        base_url = server.base_url
    cache_dir = tempfile.mkdtemp(prefix="judge-bench-cache-")
    settings = JudgeSettings(
        base_url=base_url, model=model,  # the key, if any, is read from OPENAI_API_KEY
        response_format="json_object_schema", ask_reasons=False, max_criteria=6, max_new_criteria=3,
        max_observation_chars=300, max_response_chars=200, concurrency=2, timeout_s=300, cache_dir=cache_dir,
    )
    report: dict[str, Any] = {"group_size": len(trajs), "variant": args.variant, "server": "scripted" if args.scripted else model}
    try:
        for label in ("pass1", "pass2_cached"):
            backend = RecordingBackend(OpenAIChatBackend(settings))
            judge = DracoJudge(backend, settings=settings)
            t0 = time.perf_counter()
            result = judge.score_group(instruction, trajs, args.variant, training_step=0)
            wall = time.perf_counter() - t0
            summary = judge.ledger.summary()
            report[label] = {
                "wall_s": round(wall, 3),
                "per_phase": {
                    p: {k: v[k] for k in ("calls", "cache_hits", "prompt_tokens", "completion_tokens",
                                          "unanswered_verdicts")}
                    for p, v in summary["per_phase"].items()
                },
                "total_calls": summary["total"]["calls"],
                "total_cache_hits": summary["total"]["cache_hits"],
                "criteria": len(result.criteria),
                "surviving": sum(result.surviving),
                "rewards": [round(r, 3) for r in result.rewards.tolist()],
            }
            if label == "pass1":
                tokenizer, why = load_tokenizer(args.tokenizer)
                report["prefix_sharing"] = stage_report(backend.requests, tokenizer)
                report["prefix_tokens"] = args.tokenizer if tokenizer is not None else f"not measured ({why})"
                share = report["prefix_sharing"].get("score", {}).get("common_prefix_share")
                report["score_prefix_target_met"] = None if share is None else share >= 0.60
    finally:
        if server is not None:
            server.stop()
    report["cache_speedup_pass1_over_pass2"] = round(report["pass1"]["wall_s"] / max(report["pass2_cached"]["wall_s"], 1e-9), 1)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        atomic_write_json(args.json, report)
    return 0 if report["pass2_cached"]["total_calls"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
