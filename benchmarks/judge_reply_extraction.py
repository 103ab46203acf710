"""Judge-reply extraction on hostile text: time per reply at growing sizes, as ratios in
one run. From the smallest to the largest reply (16x the characters) a linear extraction
takes ~16x the time (or less: the size cap and depth cap stop it early); the old approach
(``raw_decode`` tried at every ``{``) takes up to ~256x on unclosed braces.

    .venv/bin/python benchmarks/judge_reply_extraction.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time

from rubricgym.atomic_files import atomic_write_json
from rubricgym.judges.structured import BadReply, extract_json_object

SIZES = (4_000, 8_000, 16_000, 32_000, 64_000)
PATTERNS = {
    "open_braces": lambda n: "{" * n,
    "brace_prose": lambda n: ("{not json} " * (n // 11 + 1))[:n],
    "unclosed_string": lambda n: '{"' + "a{" * (n // 2),
    "answer_after_chatter": lambda n: "x" * (n - 40) + '{"c1": {"verdict": "pass", "steps": [0]}}',
}


def old_extract(text: str) -> object:
    """The extraction before issue 10 (quadratic on unclosed braces), as the baseline."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            return decoder.raw_decode(text, start)[0]
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
    raise ValueError("no JSON object")


def seconds(fn, text: str, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        try:
            fn(text)
        except (BadReply, ValueError):
            pass
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    report: dict[str, dict] = {}
    for name, make in PATTERNS.items():
        rows = []
        for n in SIZES:
            text = make(n)
            rows.append({"chars": len(text), "new_s": seconds(extract_json_object, text),
                         "old_s": seconds(old_extract, text, repeats=1)})
        size_ratio = rows[-1]["chars"] / rows[0]["chars"]
        new_ratio = rows[-1]["new_s"] / max(rows[0]["new_s"], 1e-7)
        old_ratio = rows[-1]["old_s"] / max(rows[0]["old_s"], 1e-7)
        report[name] = {"rows": rows, "size_ratio": size_ratio, "new_time_ratio": new_ratio,
                        "old_time_ratio": old_ratio,
                        "old_over_new_at_largest": rows[-1]["old_s"] / max(rows[-1]["new_s"], 1e-7)}
        print(f"{name:22s} {size_ratio:.0f}x chars -> new x{new_ratio:6.1f} time, old x{old_ratio:6.1f}; "
              f"at {rows[-1]['chars']} chars: new {rows[-1]['new_s'] * 1e3:7.2f} ms, old {rows[-1]['old_s'] * 1e3:8.1f} ms")
    if args.json:
        atomic_write_json(args.json, report)


if __name__ == "__main__":
    main()
