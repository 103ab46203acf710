"""One ``RubricGRPOTrainer`` step as one process of ``accelerate launch --num_processes 2``
(tests/integrations/test_trl_multiprocess.py starts it): ALFWorld, the tiny random model, 3
prompt rows of G=2 and 3 rows per process, so TRL puts one group across the two processes.
Each process writes ``rank<k>.json`` (its episodes and the advantage tensor it trained on) and
``rank<k>.pt`` (its LoRA weights before and after the step) into the folder given as argv[1]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from integrations.trl_setup import make_trainer


def main(out: Path) -> None:
    trainer = make_trainer(out / "trainer", groups=3, per_device=3)
    rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    try:
        trainer.train()
    finally:
        trainer.rollout_func.close()
    after = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    torch.save({"before": before, "after": after}, out / f"rank{rank}.pt")
    record = {
        "rank": rank, "world": world, "backend": str(trainer.accelerator.state.backend),
        "global_step": int(trainer.state.global_step),
        "grad_norm": [h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h],
        "episodes": [e.to_dict() for e in trainer.last_episodes],
        "advantages": trainer.last_advantages.tolist(),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
