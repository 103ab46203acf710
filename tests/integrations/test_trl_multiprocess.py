"""``RubricGRPOTrainer`` across processes: ``accelerate launch`` starts 2 CPU processes (gloo,
the shipped configs/accelerate/ddp.yaml) that train one step together on ALFWorld
(tests/integrations/trl_multiprocess_run.py). TRL gives each process 3 rows of the 6 (3 groups
of G=2), so one group straddles the two processes. Each process's advantages must equal what
one process computes on the whole batch of the same episodes, and the step must leave the same
weights in both (DDP's all-reduced gradients)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from integrations.trl_setup import need_trl_stack

from rubricgym.integrations.episodes import Episode, completion_advantages

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("trl_multiprocess_run.py")
ACCELERATE = Path(sys.executable).with_name("accelerate")
HANG_GUARD_S = 400  # the launch still running after this is a hang (the test fails)
G, ROWS_PER_PROCESS = 2, 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    need_trl_stack()
    out = tmp_path_factory.mktemp("trl_2_processes")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT", "LOCAL_WORLD_SIZE")}
    env.update(PYTHONPATH=str(ROOT / "tests"), OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")
    cmd = [str(ACCELERATE), "launch", "--config_file", str(ROOT / "configs" / "accelerate" / "ddp.yaml"),
           "--num_processes", "2", "--main_process_port", str(free_port()), str(SCRIPT), str(out)]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, f"accelerate launch exited {done.returncode}:\n{done.stderr[-4000:]}"
    records = [json.loads((out / f"rank{k}.json").read_text()) for k in range(2)]
    weights = [torch.load(out / f"rank{k}.pt") for k in range(2)]
    return records, weights


def test_two_gloo_processes_each_hold_a_share_and_one_group_straddles_them(launched):
    records, _ = launched
    assert [(r["rank"], r["world"], r["backend"]) for r in records] == [(0, 2, "gloo"), (1, 2, "gloo")]
    keys = [e["group_key"] for r in records for e in r["episodes"]]
    assert all(len(r["episodes"]) == ROWS_PER_PROCESS for r in records)
    groups = [keys[k: k + G] for k in range(0, len(keys), G)]
    assert all(len(set(g)) == 1 for g in groups) and len({g[0] for g in groups}) == 3
    assert keys[ROWS_PER_PROCESS - 1] == keys[ROWS_PER_PROCESS]  # rank 0's last row and rank 1's first: one group


def test_each_process_trains_on_the_single_process_advantages(launched):
    records, _ = launched
    episodes = [Episode.from_dict(e) for r in records for e in r["episodes"]]
    width = max(len(r["advantages"][0]) for r in records)
    expected, _ = completion_advantages("trca", episodes, G, width)
    assert np.abs(expected).sum() > 0
    for r in records:
        got = np.asarray(r["advantages"])
        rows = slice(r["rank"] * ROWS_PER_PROCESS, (r["rank"] + 1) * ROWS_PER_PROCESS)
        np.testing.assert_allclose(got, expected[rows, : got.shape[1]], atol=1e-6)
        assert not expected[rows, got.shape[1]:].any()  # what lies past this process's width is padding


def test_the_update_is_one_synchronized_step(launched):
    records, weights = launched
    assert [r["global_step"] for r in records] == [1, 1]
    assert records[0]["grad_norm"] == records[1]["grad_norm"] and records[0]["grad_norm"][0] > 0
    before, after = weights[0]["before"], weights[0]["after"]
    assert before.keys() == weights[1]["before"].keys() and before
    assert all(torch.equal(before[n], weights[1]["before"][n]) for n in before)  # the same start
    assert any(not torch.equal(before[n], after[n]) for n in before)  # the step moved the adapter
    assert all(torch.equal(after[n], weights[1]["after"][n]) for n in after)  # and moved it alike in both
