"""Set-up check: DeepSpeed's CPU shared-memory op comes compiled inside the installed DeepSpeed
(mk/deepspeed.mk builds that wheel), so no ZeRO run compiles it again.

    .venv/bin/python scripts/check_deepspeed_ops.py   # exit 0: loaded from the wheel; 1: why not
"""

from __future__ import annotations

import sys
from pathlib import Path

OP = "deepspeed_shm_comm"


def main() -> int:
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from deepspeed.git_version_info import installed_ops

    if not installed_ops.get(OP):
        print(f"[setup] the installed DeepSpeed {deepspeed.__version__} has no {OP} op compiled in "
              "(rebuild it: rm .venv/.deepspeed-ops-wheel; make deepspeed-ops)", file=sys.stderr)
        return 1
    module = get_accelerator().create_op_builder("ShareMemCommBuilder").load(verbose=False)
    where = Path(module.__file__ or "")
    if not where.is_relative_to(Path(deepspeed.__file__).parent):
        print(f"[setup] DeepSpeed loaded {OP} from {where}, not from its own package", file=sys.stderr)
        return 1
    print(f"[setup] DeepSpeed {deepspeed.__version__} loads {OP} from {where.name} (compiled in)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
