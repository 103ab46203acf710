"""One rank of a several-process policy update on fixed step samples, for
tests/trainer/test_distributed.py (run with torchrun, or in one process for the reference).

``python distributed_update.py OUT_DIR``: for each loss aggregation, a Trainer (tiny model)
updates once on this rank's share (every world_size-th sample) of ``global_samples()``, whose
advantages are nonzero; rank 0 writes the LoRA weights to ``OUT_DIR/<aggregation>-w<world>.safetensors``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import trainer.word_env  # noqa: F401  (registers env.factory=word: tests/ is on PYTHONPATH)

from rubricgym.trainers.config import load_config
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.trainer import Trainer

AGGREGATIONS = ("token_mean", "step_mean", "rollout_mean_step_mean")
SETTINGS = ["model.name=tiny", "env.factory=word", "algorithm.advantage=trca",
            "algorithm.tasks_per_iteration=2", "algorithm.epochs=2", "algorithm.lr=0.01",
            "algorithm.micro_batch_size=3", "algorithm.entropy_coef=0.01", "algorithm.kl_coef=0.05",
            "run.threads=1", "run.tensorboard=false", "run.progress=false", "warmup.enabled=false"]


def global_samples(count: int = 11, seed: int = 5) -> list[StepSample]:
    """Step samples of different lengths, masks, rollout lengths and nonzero advantages."""
    rng = random.Random(seed)
    out = []
    for k in range(count):
        prompt = [rng.randrange(3, 250) for _ in range(rng.randint(4, 14))]
        response = [rng.randrange(3, 250) for _ in range(rng.randint(2, 10))]
        mask = [rng.random() < 0.7 for _ in response]
        mask[0] = True
        advantage = rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 1.5)
        out.append(StepSample(prompt_ids=prompt, response_ids=response, response_text="", reasoning_tokens=None,
                              action_tokens=(0, len(response)), reward=0.0, env_reward=0.0,
                              token_advantages=[advantage if m else 0.0 for m in mask], loss_mask=mask,
                              rollout_index=k // 2, rollout_steps=rng.randint(1, 3)))
    return out


def main(out_dir: Path) -> None:
    import os

    import torch.distributed as dist
    from safetensors.torch import save_file

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # one group for all the Trainers below (they join it)
        dist.init_process_group("gloo")
    for aggregation in AGGREGATIONS:
        trainer = Trainer(load_config(None, [*SETTINGS, f"algorithm.loss_aggregation={aggregation}"]),
                          out_dir / f"run-{aggregation}")
        ranks = trainer.ranks
        mine = [s for k, s in enumerate(global_samples()) if k % ranks.world_size == ranks.rank]
        trainer.update(mine, 1)
        if ranks.is_main:
            weights = {n: p.detach().cpu().contiguous() for n, p in trainer.model.named_parameters() if p.requires_grad}
            save_file(weights, str(out_dir / f"{aggregation}-w{ranks.world_size}.safetensors"))
        trainer.close()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
