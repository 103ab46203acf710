"""One rank of a several-process ``rubricgym train`` for tests/trainer/test_distributed.py.

Runs the real CLI (``rubricgym.cli.main``) with two test hooks, set by environment variables:

* ``RUBRICGYM_TEST_RECORD=DIR``: after each update, write this rank's step samples
  (``samples-rank<r>-iter<i>.json``) and its LoRA weights (``weights-rank<r>-iter<i>.safetensors``).
* ``RUBRICGYM_TEST_KILL=RANK:ITERATION[:STOP]``: that rank SIGKILLs itself as that iteration
  starts (with ``:STOP``, SIGSTOPs itself: alive but silent, so only the time-out can end the wait).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import trainer.word_env  # noqa: F401  (registers env.factory=word)
import trainer.split_word_env  # noqa: F401  (registers WordPickSplit-Rubric-v0: a word task with an expert)

from rubricgym.trainers.trainer import Trainer

SAMPLE_FIELDS = ("prompt_ids", "response_ids", "response_text", "reasoning_tokens", "action_tokens", "reward",
                 "env_reward", "token_advantages", "loss_mask", "rollout_index", "rollout_steps")


def lora_weights(trainer: Trainer) -> dict:
    """Whole LoRA tensors (gathered on every rank when the model is sharded)."""
    whole = trainer.parallel.full_adapter_state()
    if whole is None:
        whole = {n: p.detach().cpu().contiguous() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return whole


def install_hooks() -> None:
    record = os.environ.get("RUBRICGYM_TEST_RECORD")
    kill = os.environ.get("RUBRICGYM_TEST_KILL")
    update, iteration = Trainer.update, Trainer.train_iteration

    def recording_update(self: Trainer, samples, it):
        stats = update(self, samples, it)
        if record:
            from safetensors.torch import save_file

            rank = self.ranks.rank
            rows = [{k: getattr(s, k) for k in SAMPLE_FIELDS} for s in samples]
            Path(record, f"samples-rank{rank}-iter{it}.json").write_text(json.dumps(rows), encoding="utf-8")
            save_file(lora_weights(self), str(Path(record, f"weights-rank{rank}-iter{it}.safetensors")))
        return stats

    def killing_iteration(self: Trainer):
        if kill:
            rank, at, *how = kill.split(":")
            if self.ranks.rank == int(rank) and self.iteration + 1 == int(at):
                os.kill(os.getpid(), signal.SIGSTOP if how == ["STOP"] else signal.SIGKILL)
        return iteration(self)

    Trainer.update = recording_update  # type: ignore[method-assign]
    Trainer.train_iteration = killing_iteration  # type: ignore[method-assign]


if __name__ == "__main__":
    install_hooks()
    from rubricgym.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
