"""Write verl's parquet rows and the agent-loop yaml for ALFWorld with rubricgym's agent loop
(docs/verl.md, "GPU recipe"). Run with the Python that has verl and rubricgym:

    python examples/verl_alfworld/prepare_data.py data/verl_alfworld            # the full run
    python examples/verl_alfworld/prepare_data.py data/verl_alfworld --smoke    # the 1-GPU smoke run

Full: 2,400 train rows (150 steps x 16 tasks, a fresh seed per group, the train tasks in turn)
and 128 validation rows of the eval env id; episodes of at most 25 steps, 512 tokens per turn.
Smoke: 8 train rows, 2 validation rows, 5 steps, 256 tokens per turn, the format example.
The tasks are the bundled games, or the official split when $ALFWORLD_DATA holds json_2.1.1/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rubricgym.integrations.verl_agent_loop import write_agent_loop_config, write_verl_dataset

TRAIN, EVAL = "ALFWorld-Rubric-v0", "ALFWorld-Rubric-Eval-v0"


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder for train.parquet, val.parquet and agent_loops.yaml")
    ap.add_argument("--smoke", action="store_true", help="the few rows and short episodes of the smoke run")
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        write_verl_dataset(out / "train.parquet", TRAIN, seeds=range(8))
        write_verl_dataset(out / "val.parquet", EVAL, seeds=range(10_000, 10_002))
        write_agent_loop_config(out / "agent_loops.yaml", max_steps=5, max_new_tokens=256,
                                prompt={"style": "chat", "format_example": True})
    else:
        write_verl_dataset(out / "train.parquet", TRAIN, seeds=range(2_400))
        write_verl_dataset(out / "val.parquet", EVAL, seeds=range(10_000, 10_128))
        write_agent_loop_config(out / "agent_loops.yaml", max_steps=25, max_new_tokens=512, prompt={"style": "chat"})
    print("wrote", ", ".join(sorted(p.name for p in out.iterdir())), "in", out)
    return out


if __name__ == "__main__":
    main()
