"""The llama.cpp server's prompt-evaluation threads: llama-cpp-python's default (every core)
against the generation threads (what ``rubricgym serve-llm`` and ``LocalLLMServer`` pass), on
the packaged SmolLM2, idle and beside one busy process (what the other pytest worker is).

    .venv/bin/python benchmarks/llama_threads.py                  # writes results/llama_threads.json

Each configuration answers the same three requests: a ~700-token prompt, a ~3,100-token prompt
(one token generated each: prompt evaluation) and a short prompt generating up to 200 tokens.
Printed per request: wall seconds and the server's CPU seconds (from /proc), and per
configuration the ratios of the sums over the repeats against the default, in the same run
(never asserted). The repeats alternate: this machine's speed drifts by a third within minutes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

from rubricgym.llm_server import MODEL_ALIAS, LocalLLMServer
from rubricgym.servers import process_cpu_seconds

RESULTS = Path(__file__).resolve().parent / "results" / "llama_threads.json"
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank. "
REQUESTS = [("prompt ~700", SENTENCE * 46, 1), ("prompt ~3100", SENTENCE * 220 + "!", 1),
            ("generate 200", "Count to fifty.", 200)]


class ThreadsServer(LocalLLMServer):
    """The shipped server command with ``--n_threads_batch`` as given (None: llama-cpp-python's default)."""

    def __init__(self, batch_threads: int | None, **kwargs: Any):
        self.batch_threads = batch_threads
        super().__init__(**kwargs)

    @property
    def command(self) -> list[str]:
        command = super().command
        at = command.index("--n_threads_batch")
        del command[at: at + 2]
        return command + (["--n_threads_batch", str(self.batch_threads)] if self.batch_threads else [])


def _busy(stop: Any) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _cpu_seconds(pid: int) -> float:
    seconds = process_cpu_seconds(pid)
    assert seconds is not None, "the llama.cpp server exited"
    return seconds


def _ask(base_url: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = json.dumps({"model": MODEL_ALIAS, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(f"{base_url}/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=900) as reply:
        return json.loads(reply.read())["usage"]


def measure(batch_threads: int | None, threads: int, contended: bool) -> list[dict[str, Any]]:
    stop = mp.Event()
    busy = mp.Process(target=_busy, args=(stop,)) if contended else None
    if busy:
        busy.start()
    rows = []
    try:
        with ThreadsServer(batch_threads, n_ctx=4096, threads=threads) as server:
            assert server.process.process is not None
            pid = server.process.process.pid
            _ask(server.base_url, "hi", 1)  # loaded and warm
            for name, prompt, max_tokens in REQUESTS:
                cpu, start = _cpu_seconds(pid), time.monotonic()
                usage = _ask(server.base_url, prompt, max_tokens)
                rows.append({"request": name, "prompt_tokens": usage["prompt_tokens"],
                             "completion_tokens": usage["completion_tokens"],
                             "wall_s": round(time.monotonic() - start, 2), "cpu_s": round(_cpu_seconds(pid) - cpu, 2)})
    finally:
        if busy:
            stop.set()
            busy.join()
    return rows


def _total(rows: list[list[dict[str, Any]]], request: str, key: str) -> float:
    return sum(row[key] for repeat in rows for row in repeat if row["request"] == request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="generation threads (the tests' server: 1)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each configuration, alternated")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    settings = {"default (every core)": None, "same as generation": args.threads}
    results: dict[str, Any] = {"cores": os.cpu_count(), "threads": args.threads, "repeats": args.repeats, "runs": []}
    for contended in (False, True):
        by_setting: dict[str, list[list[dict[str, Any]]]] = {label: [] for label in settings}
        for _ in range(args.repeats):  # alternated: this machine's speed drifts within minutes
            for label, batch in settings.items():
                rows = measure(batch, args.threads, contended)
                by_setting[label].append(rows)
                for row in rows:
                    print(f"busy neighbour={contended!s:5} batch threads={label:21} {row}", flush=True)
        default, same = by_setting.values()
        ratios = [{"request": name,
                   "wall_default_over_same": round(_total(default, name, "wall_s") / _total(same, name, "wall_s"), 2),
                   "cpu_default_over_same": round(_total(default, name, "cpu_s") / _total(same, name, "cpu_s"), 2)}
                  for name, _, _ in REQUESTS]
        for ratio in ratios:
            print(f"busy neighbour={contended!s:5} summed over repeats: {ratio}", flush=True)
        results["runs"].append({"busy_neighbour": contended, "rows": by_setting, "ratios": ratios})
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
