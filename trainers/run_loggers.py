"""Where a run's metrics go besides ``metrics.jsonl``: TensorBoard, Weights & Biases, MLflow.

``run.report_to`` names them with TRL's names (``[tensorboard, wandb, mlflow]``, ``all``,
``none``). Every logger gets the same scalars under the same names (``scalars``: TensorBoard's
tags), so a dashboard built on one reads the others. Each library is imported only when its
logger logs its first metrics: ``import rubricgym`` and a run that does not ask stay light.
One asked for but not installed fails when the trainer starts, naming the extra to install.

Settings come from each library's own environment variables, as with TRL: ``WANDB_MODE``
(``offline``), ``WANDB_PROJECT``, ``WANDB_RUN_ID`` with ``WANDB_RESUME``;
``MLFLOW_TRACKING_URI`` (MLflow's default: ``sqlite:///mlflow.db`` in the working directory),
``MLFLOW_EXPERIMENT_NAME``. The run folder's name names the run in both.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = ["REPORT_TO", "LOGGER_MODULES", "RunLogger", "RunLoggers", "check_report_to", "scalars"]

log = logging.getLogger(__name__)

REPORT_TO = ("tensorboard", "wandb", "mlflow")
"""The loggers ``run.report_to`` can name (TRL's names); ``all`` is every one, ``none`` none."""
LOGGER_MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
"""The module each logger imports (found at start, imported at its first metrics)."""
_EXTRA = {"tensorboard": "train", "wandb": "wandb", "mlflow": "mlflow"}
WARMUP_AXIS = "warmup/step"
RL_AXIS = "iteration"


def check_report_to(names: str | Sequence[str]) -> list[str]:
    """The logger names, in order and once each: ``all`` and ``none`` expanded, others refused
    with the ones that exist (a typo must not silently log nowhere)."""
    items = [names] if isinstance(names, str) else list(names)
    out: list[str] = []
    for name in items:
        expanded = list(REPORT_TO) if name == "all" else [] if name == "none" else [name]
        for item in expanded:
            if item not in REPORT_TO:
                raise ValueError(f"run.report_to: unknown logger {item!r}; one of {', '.join(REPORT_TO)}, "
                                 "all or none")
            if item not in out:
                out.append(item)
    return out


def scalars(metrics: Mapping[str, Any]) -> tuple[str, int, dict[str, float]]:
    """One metrics line as (axis, step, {name: value}): the numbers only, named as TensorBoard
    has always named them. Warm-start lines are ``warmup/<key>`` (``warmup/<eval>_<key>`` for
    its evaluations) over ``warmup_step``; every other line is ``<key>`` over ``iteration``."""
    warm = metrics.get("phase") == "warmup"
    prefix = f"warmup/{metrics.get('eval', '')}{'_' if 'eval' in metrics else ''}" if warm else ""
    step = int(metrics.get("warmup_step", 0) if warm else metrics["iteration"])
    values = {prefix + key: float(value) for key, value in metrics.items()
              if key not in ("iteration", "warmup_step") and isinstance(value, (int, float))}
    return (WARMUP_AXIS if warm else RL_AXIS), step, values


class RunLogger(Protocol):
    """One destination: opened at its first metrics, closed with the trainer."""

    def log(self, axis: str, step: int, values: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class TensorBoardLogger:
    """``<run>/tensorboard``: scalars by name over their step."""

    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter  # optional: the train extra

        self.writer = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, axis: str, step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A W&B run (files under ``<run>/wandb``). W&B's own step only grows, while the warm start
    and the iterations each count from 1: every name is plotted over its axis instead
    (``define_metric``), logged with it (``iteration`` or ``warmup/step``)."""

    def __init__(self, run_dir: Path, run_name: str, config: Mapping[str, Any]):
        import wandb  # optional: the wandb extra

        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "rubricgym"), name=run_name,
                              dir=str(run_dir), config=dict(config), reinit="create_new",
                              settings=wandb.Settings(console="off", save_code=False))
        self.defined: set[str] = set()

    def log(self, axis: str, step: int, values: dict[str, float]) -> None:
        if axis not in self.defined:
            self.run.define_metric(axis)
            self.defined.add(axis)
        for name in values.keys() - self.defined:
            self.run.define_metric(name, step_metric=axis)
            self.defined.add(name)
        self.run.log({axis: step, **values})

    def close(self) -> None:
        self.run.finish()


class MLflowLogger:
    """An MLflow run in ``MLFLOW_EXPERIMENT_NAME`` (default ``rubricgym``), tagged with the run
    folder: a resumed run (``--resume``) goes on logging into the same MLflow run. Through
    MLflow's client, never the fluent API's process-wide active run (runs may share a process)."""

    TAG = "rubricgym.run_dir"

    def __init__(self, run_dir: Path, run_name: str, config: Mapping[str, Any]):
        from mlflow.entities import Param  # optional: the mlflow extra
        from mlflow.tracking import MlflowClient  # optional: the mlflow extra

        self.client = MlflowClient()
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "rubricgym")
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        where = str(run_dir.resolve())
        found = self.client.search_runs([experiment_id], filter_string=f"tags.`{self.TAG}` = '{where}'",
                                        max_results=1)
        if found:
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            return
        self.run_id = self.client.create_run(experiment_id, run_name=run_name, tags={self.TAG: where}).info.run_id
        params = [Param(key, str(value)[:6000]) for key, value in _flat(config).items()]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=params[start:start + 100])

    def log(self, axis: str, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric  # optional: the mlflow extra

        now = int(time.time() * 1000)
        metrics = [Metric(name, value, now, step) for name, value in values.items() if math.isfinite(value)]
        for start in range(0, len(metrics), 1000):  # MLflow's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[start:start + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class RunLoggers:
    """The run's loggers, opened at the first metrics (the run folder exists then). A logger
    that fails to open or log is reported once and dropped: metrics.jsonl stays the record."""

    def __init__(self, names: Sequence[str], run_dir: Path, run_name: str, config: Mapping[str, Any],
                 asked: bool = True):
        self.names = check_report_to(names)
        missing = [n for n in self.names if importlib.util.find_spec(LOGGER_MODULES[n]) is None]
        if missing and asked:
            extras = ",".join(dict.fromkeys(_EXTRA[n] for n in missing))
            raise ImportError(f"run.report_to names {', '.join(missing)}, which is not installed: "
                              f"pip install 'rubricgym[{extras}]' (or drop it from run.report_to)")
        for name in missing:  # the default (run.tensorboard) without its library: metrics.jsonl only
            log.warning("%s is not installed; metrics go to metrics.jsonl only", name)
            self.names.remove(name)
        self.run_dir, self.run_name, self.config = run_dir, run_name, config
        self.loggers: dict[str, RunLogger] | None = None

    def _open(self) -> dict[str, RunLogger]:
        opened: dict[str, RunLogger] = {}
        for name in self.names:
            try:
                opened[name] = (TensorBoardLogger(self.run_dir) if name == "tensorboard" else
                                WandbLogger(self.run_dir, self.run_name, self.config) if name == "wandb" else
                                MLflowLogger(self.run_dir, self.run_name, self.config))
            except Exception:  # a dashboard's outage must not stop training
                log.exception("run.report_to: %s could not be opened; metrics go to the others", name)
        return opened

    def log(self, metrics: Mapping[str, Any]) -> None:
        """One metrics line to every logger (opened on the first)."""
        if not self.names:
            return
        if self.loggers is None:
            self.loggers = self._open()
        axis, step, values = scalars(metrics)
        for name, logger in list(self.loggers.items()):
            try:
                logger.log(axis, step, values)
            except Exception:
                log.exception("run.report_to: %s failed to log; it is dropped for this run", name)
                del self.loggers[name]

    def close(self) -> None:
        for name, logger in (self.loggers or {}).items():
            try:
                logger.close()
            except Exception:
                log.exception("run.report_to: closing %s failed", name)
        self.loggers = None
