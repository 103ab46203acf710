"""Where the main job's update time goes, and what two levers would buy (issue 51's "what would").

On 2 cores the main job's RL iterations are bounded by the update: every step sample's whole
prompt goes through the model for the reference pass (no grad), the training forward and the
backward. This measures those three passes, in one run, on real main-job samples: the warm
start's demonstrations (the expert's steps through ALFWorld with the prompts the trainer shows
at each step, history included), laid out by the trainer's own ``collate`` and scored by its
``response_logprobs``. Layouts, each a ratio against the first (the main job's) in the same run:

* LoRA on q/k/v/o of every layer (the main job) or of the top 8 / top 4 layers only (peft's
  ``layers_to_transform``): the backward then stops below the lowest adapted layer;
* the main job's prompt settings, or a shorter prompt (history 1, 15 admissible actions,
  600 observation characters).

    .venv/bin/python benchmarks/update_passes.py [--games 2] [--reps 3] [--json OUT]

The update's time is estimated as reference + forward + backward over the same micro-batches
(one epoch, one minibatch: no old-log-prob pass), medians over ``--reps`` after a warm-up.
Nothing here trains; it says how much faster an update could be, not whether RL then learns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import date
from pathlib import Path
from typing import Any

import torch

LAYOUTS = [("all layers", None), ("top 8 layers", 8), ("top 4 layers", 4)]
SHORT_PROMPT = {"history": 1, "max_admissible": 15, "max_observation_chars": 600}


def demonstration_samples(prompt: Any, games: int, tokenizer: Any, model: Any) -> list[Any]:
    """The warm start's demonstrations of the first ``games`` train games, as step samples."""
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.generation import stop_token_ids
    from rubricgym.trainers.rollout import available_tasks, make_env_factory
    from rubricgym.trainers.warmup import as_sample, collect_demonstrations

    env_settings = load_config(None, []).env
    env_fn = make_env_factory(env_settings)
    env = env_fn()
    tasks = available_tasks(env, env_settings)[:games]
    env.close()
    demos = collect_demonstrations(env_fn, tokenizer, prompt, tasks, seed=0,
                                   stop_ids=stop_token_ids(tokenizer, model))
    return [as_sample(d) for d in demos]


def time_passes(model: Any, batches: list[Any], reps: int) -> dict[str, float]:
    """Median seconds of the reference (no-grad) forward, the training forward and the backward,
    each summed over ``batches``."""
    from rubricgym.trainers.update import response_logprobs

    rows: list[tuple[float, float, float]] = []
    for rep in range(reps + 1):  # the first is a warm-up
        ref = fwd = bwd = 0.0
        for batch in batches:
            t0 = time.perf_counter()
            with torch.no_grad():
                response_logprobs(model, batch)
            t1 = time.perf_counter()
            logp, _ = response_logprobs(model, batch)
            loss = -(logp * batch.loss_mask).sum() / batch.loss_mask.sum()
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            ref, fwd, bwd = ref + t1 - t0, fwd + t2 - t1, bwd + t3 - t2
        if rep:
            rows.append((ref, fwd, bwd))
    med = [statistics.median(r[k] for r in rows) for k in range(3)]
    return {"reference_s": round(med[0], 3), "forward_s": round(med[1], 3), "backward_s": round(med[2], 3),
            "update_s": round(sum(med), 3)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=2, help="train games whose demonstrations are the samples")
    ap.add_argument("--batches", type=int, default=2, help="micro-batches of 4 samples timed per pass")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", dest="out", default=None)
    args = ap.parse_args(argv)

    from peft import LoraConfig, get_peft_model

    import rubricgym  # noqa: F401  (registers the envs)
    from rubricgym.models import load_causal_lm
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.update import collate

    torch.set_num_threads(args.threads)
    config = load_config(None, [])
    prompts = {"main job's prompt": config.prompt,
               "short prompt": config.prompt.model_copy(update=SHORT_PROMPT)}
    base, tokenizer = load_causal_lm(config.model.name, device="cpu", seed=0)
    pad = tokenizer.pad_token_id
    n_layers = base.config.num_hidden_layers
    rows, baseline = [], None
    for prompt_label, prompt in prompts.items():
        samples = demonstration_samples(prompt, args.games, tokenizer, base)
        # spread over the episode: every k-th sample, so late steps (longer histories) are in
        step = max(1, len(samples) // (4 * args.batches))
        chosen = samples[::step][: 4 * args.batches]
        batches = [collate(chosen[k : k + 4], pad) for k in range(0, len(chosen), 4)]
        prompt_tokens = statistics.mean(len(s.prompt_ids) for s in chosen)
        for layout_label, top in LAYOUTS:
            extra = {} if top is None else {"layers_to_transform": list(range(n_layers - top, n_layers))}
            lora = LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=0.0,
                              target_modules=list(config.lora.target_modules), task_type="CAUSAL_LM", **extra)
            model = get_peft_model(base, lora)
            model.train()
            times = time_passes(model, batches, args.reps)
            base = model.unload()  # the same base weights for the next layout
            baseline = baseline or times["update_s"]
            row = {"prompt": prompt_label, "lora": layout_label, "samples": len(chosen),
                   "mean_prompt_tokens": round(prompt_tokens, 1), **times,
                   "update_vs_main_job": round(baseline / times["update_s"], 2)}
            rows.append(row)
            print(json.dumps(row))
    result = {
        "benchmark": "update_passes", "date": date.today().isoformat(), "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
        "model": config.model.name, "layers": n_layers, "lora_r": config.lora.r,
        "load_average": list(os.getloadavg()),
        "note": "update_s = reference + forward + backward over the same micro-batches of 4; "
                "update_vs_main_job: the first row's update_s / this row's (higher is faster)",
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
