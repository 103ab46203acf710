"""``run.report_to``: one short run logs to TensorBoard, Weights & Biases (offline) and MLflow (a
local file store) at once, and each store, read back with its own reader, holds the same
metric names with the same values at the same steps. No mock: the libraries' real offline
stores (W&B's run file is read record by record, as ``wandb sync`` would)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from requirements_guard import need

from rubricgym.trainers.config import load_config
from rubricgym.trainers.run_loggers import RL_AXIS, WARMUP_AXIS, RunLoggers, check_report_to

Points = dict[tuple[str, int], float]  # (metric name, step) -> value

SETTINGS = [
    "model.name=tiny", "model.device=cpu", "env.factory=expert-word", "env.max_steps=2",
    "env.kwargs={num_tasks: 4}", "algorithm.advantage=grpo", "algorithm.group_size=2",
    "algorithm.tasks_per_iteration=1", "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40",
    "warmup.steps=2", "warmup.games=2", "warmup.evaluate=false", "run.iterations=1", "run.progress=false",
    "run.evaluate_after=false", "run.report_to=[tensorboard, wandb, mlflow]", "run.name=logged",
]


def tensorboard_points(run: Path) -> Points:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {(tag, e.step): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}


def wandb_records(path: Path) -> Iterator[object]:
    """The records of a W&B run file: its LevelDB-style log (a 7-byte file header, 32 KiB
    blocks of checksummed chunks; kinds 1 full, 2 first, 3 middle, 4 last) of protobufs."""
    from wandb.proto import wandb_internal_pb2

    data, block, header = path.read_bytes(), 32768, 7
    ident, magic, _version = struct.unpack("<4sHB", data[:header])
    assert (ident, magic) == (b":W&B", 0xBEE1), "not a W&B run file"
    pos, pending = header, b""
    while pos + header <= len(data):
        room = block - pos % block
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + header])
        if room < header or (length == 0 and kind == 0):  # a block's zero padding
            pos += room
            continue
        pending += data[pos + header:pos + header + length]
        pos += header + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def wandb_points(run: Path) -> Points:
    files = list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    points: Points = {}
    for record in wandb_records(files[0]):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
        axis = WARMUP_AXIS if WARMUP_AXIS in row else RL_AXIS
        points.update({(k, row[axis]): float(v) for k, v in row.items() if not k.startswith("_") and k != axis})
    return points


def mlflow_points(uri: str, run: Path) -> Points:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("rubricgym")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.data.tags["rubricgym.run_dir"] == str(run.resolve()) and found.info.run_name == "logged"
    assert found.data.params["model.name"] == "tiny"
    return {(name, m.step): m.value for name in found.data.metrics
            for m in client.get_metric_history(found.info.run_id, name)}


@pytest.mark.slow  # a tiny model's warm start and one iteration, three loggers opened
def test_wandb_and_mlflow_get_tensorboards_metric_names_and_values(tmp_path, monkeypatch):
    for module in ("tensorboard", "wandb", "mlflow"):
        need(module, "pip install -e '.[all]'")
    from rubricgym.trainers.trainer import Trainer
    from trainer.word_env import make_expert_word_env  # noqa: F401  (registers the word factories)

    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for SQLite; a file store opens in ms
    trainer = Trainer(load_config(None, [*SETTINGS, f"run.output_dir={tmp_path}"]))
    try:
        trainer.train()
    finally:
        trainer.close()
    run = tmp_path / "logged"
    board = tensorboard_points(run)
    names = {name for name, _ in board}
    assert {"lr", "env_return_mean", "warmup/loss"} <= names, sorted(names)
    assert {step for name, step in board if name == "warmup/loss"} == {1, 2}  # the warm start's own axis
    assert {step for name, step in board if name == "lr"} == {1}
    for store, points in (("wandb", wandb_points(run)), ("mlflow", mlflow_points(uri, run))):
        assert {name for name, _ in points} == names, store
        assert points.keys() == board.keys(), store
        assert all(points[k] == pytest.approx(board[k], rel=1e-5, abs=1e-6) for k in board), store


def test_report_to_takes_trls_names_and_refuses_others():
    assert check_report_to("all") == ["tensorboard", "wandb", "mlflow"]
    assert check_report_to(["wandb", "none", "wandb"]) == ["wandb"]
    assert load_config(None, ["run.report_to=mlflow"]).run.loggers() == ["mlflow"]
    assert load_config(None, ["run.tensorboard=false"]).run.loggers() == []
    assert load_config(None, []).run.loggers() == ["tensorboard"]
    with pytest.raises(ValueError, match="unknown logger 'wandbb'"):
        load_config(None, ["run.report_to=[wandbb]"])


def test_a_logger_asked_for_but_not_installed_fails_at_start_with_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # not importable, as when it was never installed
    with pytest.raises(ImportError, match=r"pip install 'rubricgym\[mlflow\]'"):
        RunLoggers(["tensorboard", "mlflow"], tmp_path, "r", {})
    assert RunLoggers(["mlflow"], tmp_path, "r", {}, asked=False).names == []  # a default: warned, dropped


def test_nothing_imports_wandb_or_mlflow_unless_a_run_asks():
    code = ("import sys, rubricgym, rubricgym.trainers.run_loggers\n"
            "from rubricgym.trainers.config import load_config\n"
            "load_config(None, ['run.report_to=all']).run.loggers()\n"
            "print(sorted(m for m in ('wandb', 'mlflow') if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]", run.stdout
