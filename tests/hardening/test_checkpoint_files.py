"""Issue 10, items 1 and 8: checkpoints are data, never code; a damaged run resumes from
its newest intact checkpoint with nothing lost, and every refusal names the file.

One reference run (3 iterations, a checkpoint each) is copied per fault; the fault is
applied, the run is resumed, and its metrics must equal the uninterrupted run's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rubricgym.trainers.checkpoint import (
    ADAPTER_FILE,
    LEGACY_PICKLE,
    MANIFEST_FILE,
    STATE_FILE,
    TENSORS_FILE,
    CheckpointError,
    config_hash,
    list_checkpoints,
    read_checkpoint,
    verify_checkpoint,
)
from rubricgym.trainers.config import load_config
from rubricgym.trainers.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
WORD_CLI = ROOT / "tests" / "trainer" / "word_cli.py"  # the CLI with env.factory=word registered
SETTINGS = [
    "model.name=tiny", "env.factory=word", "env.max_steps=2",
    "algorithm.advantage=grpo", "algorithm.group_size=2", "algorithm.tasks_per_iteration=2",
    "algorithm.lr=0.01", "algorithm.skip_zero_advantage=false", "algorithm.entropy_coef=0.05",
    "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40", "run.iterations=3", "run.progress=false",
    "run.evaluate_after=false", "run.keep_checkpoints=5", "run.tensorboard=false",
]
VOLATILE = ("time/", "throughput/", "memory/")


def _stable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if not k.startswith(VOLATILE)} for m in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("ref") / "run"
    trainer = Trainer(load_config(None, SETTINGS), run)
    trainer.train()
    trainer.close()
    assert [p.name for p in list_checkpoints(run)] == [f"checkpoint-00000{i}" for i in (1, 2, 3)]
    return run


def _copy(reference: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    return run


def _metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _resume_to_the_end(run: Path) -> Trainer:
    trainer = Trainer.from_run_dir(run)
    trainer.train()
    trainer.close()
    return trainer


def _reseal(ckpt: Path) -> None:
    """What an attacker who rewrites a file would also do: make the manifest match again."""
    manifest = json.loads((ckpt / MANIFEST_FILE).read_text())
    for rel in manifest["files"]:
        data = (ckpt / rel).read_bytes()
        manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (ckpt / MANIFEST_FILE).write_text(json.dumps(manifest))


class _Payload:
    """A pickle that runs a command when unpickled (the issue's reproduction)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_holds_no_pickle(reference):
    ckpt = list_checkpoints(reference)[-1]
    names = sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*") if p.is_file())
    assert {ADAPTER_FILE, TENSORS_FILE, STATE_FILE, MANIFEST_FILE} <= set(names)
    assert not [n for n in names if n.endswith((".pt", ".pth", ".bin", ".pkl", ".pickle"))]
    for name in names:
        assert not (ckpt / name).read_bytes().startswith(b"\x80"), f"{name} looks like a pickle"
    verify_checkpoint(ckpt)
    state = json.loads((ckpt / STATE_FILE).read_text())
    assert state["iteration"] == 3 and len(state["python_random"]["internal"]) == 625


@pytest.mark.slow
def test_pickled_state_file_is_refused_unopened(reference, tmp_path):
    """The attack: a checkpoint whose state is a pickle that runs a shell command."""
    run = _copy(reference, tmp_path)
    marker = tmp_path / "pwned"
    for ckpt in list_checkpoints(run):
        shutil.rmtree(ckpt)
    crafted = run / "checkpoint-000003"
    crafted.mkdir()
    (crafted / LEGACY_PICKLE).write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(CheckpointError, match=LEGACY_PICKLE) as err:
        Trainer.from_run_dir(run)
    assert "never loaded" in str(err.value) and str(crafted / LEGACY_PICKLE) in str(err.value)
    assert not marker.exists()
    # through the CLI: exit 2, the file named, no traceback, nothing executed
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    out = subprocess.run([sys.executable, str(WORD_CLI), "train", "--resume", str(run), "--quiet"],
                         env=env, cwd=ROOT, timeout=600, capture_output=True, text=True, check=False)
    assert out.returncode == 2, out.stderr
    assert LEGACY_PICKLE in out.stderr and "Traceback" not in out.stderr
    assert not marker.exists()
    assert (crafted / LEGACY_PICKLE).exists()  # evidence kept, not deleted


@pytest.mark.parametrize("fault", ["pickle_in_state_json", "state_json_wrong_types", "garbage_tensors",
                                   "garbage_adapter", "deep_json", "manifest_escapes_folder", "rng_out_of_range"])
def test_crafted_files_with_a_matching_manifest_are_refused(reference, tmp_path, fault):
    """An attacker can recompute checksums; the content is still only parsed as data."""
    run = _copy(reference, tmp_path)
    ckpt = list_checkpoints(run)[-1]
    marker = tmp_path / "pwned"
    named = {"pickle_in_state_json": STATE_FILE, "state_json_wrong_types": STATE_FILE,
             "garbage_tensors": TENSORS_FILE, "garbage_adapter": ADAPTER_FILE, "deep_json": STATE_FILE,
             "manifest_escapes_folder": MANIFEST_FILE, "rng_out_of_range": STATE_FILE}[fault]
    if fault == "pickle_in_state_json":
        (ckpt / STATE_FILE).write_bytes(pickle.dumps(_Payload(marker)))
    elif fault == "state_json_wrong_types":
        state = json.loads((ckpt / STATE_FILE).read_text())
        state["python_random"]["internal"] = "not a list"
        (ckpt / STATE_FILE).write_text(json.dumps(state))
    elif fault in ("garbage_tensors", "garbage_adapter"):
        target = ckpt / (TENSORS_FILE if fault == "garbage_tensors" else ADAPTER_FILE)
        target.write_bytes((2**40).to_bytes(8, "little") + b"{" * 64)  # header length far past the end
    elif fault == "rng_out_of_range":
        state = json.loads((ckpt / STATE_FILE).read_text())
        state["numpy_random"]["keys"][0] = -1
        (ckpt / STATE_FILE).write_text(json.dumps(state))
    elif fault == "deep_json":
        (ckpt / STATE_FILE).write_text("[" * 100_000 + "]" * 100_000)
    _reseal(ckpt)
    if fault == "manifest_escapes_folder":
        manifest = json.loads((ckpt / MANIFEST_FILE).read_text())
        data = (run / "config.yaml").read_bytes()
        manifest["files"]["../config.yaml"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        (ckpt / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(ckpt)
    assert str(ckpt / named) in str(err.value)
    assert not marker.exists()


def test_optimizer_settings_of_the_wrong_kind_are_refused_before_training(reference, tmp_path):
    run = _copy(reference, tmp_path)
    ckpt = list_checkpoints(run)[-1]
    state = json.loads((ckpt / STATE_FILE).read_text())
    state["optimizer_param_groups"][0]["lr"] = "0.01; rm -rf /"
    (ckpt / STATE_FILE).write_text(json.dumps(state))
    _reseal(ckpt)
    with pytest.raises(CheckpointError, match="lr must be a number") as err:
        Trainer.from_run_dir(run)
    assert str(ckpt / STATE_FILE) in str(err.value)


FAULTS = {
    "empty_state_file": lambda c: (c / STATE_FILE).write_bytes(b""),
    "garbage_safetensors": lambda c: (c / TENSORS_FILE).write_bytes(os.urandom(4096)),
    "truncated_adapter": lambda c: (c / ADAPTER_FILE).write_bytes((c / ADAPTER_FILE).read_bytes()[:100]),
    "one_flipped_byte": lambda c: _flip(c / TENSORS_FILE),
    "missing_manifest": lambda c: (c / MANIFEST_FILE).unlink(),
    "half_written_manifest": lambda c: (c / MANIFEST_FILE).write_text((c / MANIFEST_FILE).read_text()[:40]),
    "missing_folder_contents": lambda c: [p.unlink() for p in c.rglob("*") if p.is_file()],
}


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_damaged_latest_checkpoint_falls_back_with_nothing_lost(reference, tmp_path, fault, caplog):
    run = _copy(reference, tmp_path)
    latest = list_checkpoints(run)[-1]
    FAULTS[fault](latest)
    with caplog.at_level(logging.WARNING, logger="rubricgym.trainers.checkpoint"):
        trainer = Trainer.from_run_dir(run)
    assert trainer.iteration == 2
    assert any(latest.name in r.getMessage() for r in caplog.records), "the warning names the bad checkpoint"
    assert (run / f"{latest.name}.corrupt").is_dir()  # kept for inspection, never picked again
    trainer.train()
    trainer.close()
    assert _stable(_metrics(run)) == _stable(_metrics(reference))  # iteration 3 redone exactly


def test_partial_last_metrics_line_is_cut_and_the_run_resumes(reference, tmp_path):
    run = _copy(reference, tmp_path)
    shutil.rmtree(list_checkpoints(run)[-1])  # killed after iteration 3's metrics, before its checkpoint...
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"iteration": 4, "kl": 0.0')  # ...and mid-way through a later line
    _resume_to_the_end(run)
    assert _stable(_metrics(run)) == _stable(_metrics(reference))


def test_broken_config_yaml_uses_the_checkpoint_copy(reference, tmp_path, caplog):
    run = _copy(reference, tmp_path)
    shutil.rmtree(list_checkpoints(run)[-1])
    (run / "config.yaml").write_text("model: [unclosed\n")
    with caplog.at_level(logging.WARNING, logger="rubricgym.trainers.run_files"):
        trainer = Trainer.from_run_dir(run)
    assert any("config.yaml" in r.getMessage() for r in caplog.records)
    trainer.train()
    trainer.close()
    assert _stable(_metrics(run)) == _stable(_metrics(reference))
    assert load_config(run / "config.yaml") == load_config(reference / "config.yaml")  # rewritten whole


@pytest.mark.slow
def test_no_intact_checkpoint_is_a_clear_refusal_through_the_cli(reference, tmp_path):
    run = _copy(reference, tmp_path)
    for ckpt in list_checkpoints(run):
        (ckpt / STATE_FILE).write_text("")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    out = subprocess.run([sys.executable, str(WORD_CLI), "train", "--resume", str(run), "--quiet"],
                         env=env, cwd=ROOT, timeout=600, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    for ckpt in list_checkpoints(run):
        assert str(ckpt / STATE_FILE) in out.stderr  # every bad file named
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # nothing moved or lost


# ---- issue 28, item 1: a run folder never names code to import ---------------------------------
HOOK_MODULE = """import pathlib
pathlib.Path(__file__).with_name("imported-from-a-run-folder").write_text("ran")
def make(**kwargs):
    pathlib.Path(__file__).with_name("called-from-a-run-folder").write_text("ran")
"""


def _plant_module(tmp_path: Path, monkeypatch) -> Path:
    """An importable module that leaves a mark when imported or called (what a ``hubconf.py`` does)."""
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "planted_hook.py").write_text(HOOK_MODULE)
    monkeypatch.syspath_prepend(str(code_dir))
    return code_dir


def _retarget_state(ckpt: Path, factory: str) -> None:
    """Set env.factory in the checkpoint's saved config, with its hash and manifest recomputed."""
    state = json.loads((ckpt / STATE_FILE).read_text())
    state["config"]["env"]["factory"] = factory
    state["config_sha256"] = config_hash(state["config"])
    (ckpt / STATE_FILE).write_text(json.dumps(state))
    manifest = json.loads((ckpt / MANIFEST_FILE).read_text())
    data = (ckpt / STATE_FILE).read_bytes()
    manifest["files"][STATE_FILE] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (ckpt / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["planted_hook:make", "torch.hub:load"])
def test_resume_never_imports_a_factory_named_in_the_run_folder(reference, tmp_path, monkeypatch, capsys, factory):
    """config.yaml and every checkpoint's state name an import path (hash and manifest made to
    match): --resume refuses with the fix, and nothing from the folder's text is imported."""
    from rubricgym.cli import main

    code_dir = _plant_module(tmp_path, monkeypatch)
    run = _copy(reference, tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["env"]["factory"] = factory
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    for ckpt in list_checkpoints(run):
        _retarget_state(ckpt, factory)
    assert main(["train", "--resume", str(run), "--quiet", "--iterations", "4"]) == 2
    err = capsys.readouterr().err
    assert "an import path is not accepted" in err and "register_env_factory" in err, err
    assert "planted_hook" not in sys.modules and not list(code_dir.glob("*-from-a-run-folder"))


@pytest.mark.slow
def test_resume_with_a_factory_this_process_did_not_register_names_the_registered_ones(reference, tmp_path, capsys):
    from rubricgym.cli import main

    run = _copy(reference, tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["env"]["factory"] = "wrod"
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", "--resume", str(run), "--quiet", "--iterations", "4"]) == 2
    err = capsys.readouterr().err
    assert "no env factory 'wrod' is registered; did you mean word?" in err and "register_env_factory" in err, err


def test_a_config_naming_an_import_path_is_refused_when_read(tmp_path, monkeypatch):
    code_dir = _plant_module(tmp_path, monkeypatch)
    path = tmp_path / "train.yaml"
    path.write_text("env:\n  factory: planted_hook:make\n  max_steps: 2\n")
    with pytest.raises(ValueError, match="an import path is not accepted"):
        load_config(path)
    with pytest.raises(ValueError, match="an import path is not accepted"):
        load_config(None, ["env.factory=planted_hook:make", "env.max_steps=2"])
    assert "planted_hook" not in sys.modules and not list(code_dir.glob("*-from-a-run-folder"))


# ---- issue 28, item 7: writes in a run folder replace, never follow ------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("linked", ["trajectories/iter-000003.jsonl", "summary.json", "metrics.jsonl"])
def test_resume_refuses_a_run_folder_with_links_leading_outside(reference, tmp_path, capsys, linked):
    from rubricgym.cli import main

    run = _copy(reference, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("not the run's")
    (run / linked).unlink(missing_ok=True)
    (run / linked).symlink_to(victim)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.is_symlink()}
    assert main(["train", "--resume", str(run), "--quiet", "--iterations", "4"]) == 2
    err = capsys.readouterr().err
    assert "holds links leading outside the run folder" in err and f"{linked} -> {victim}" in err, err
    assert victim.read_text() == "not the run's"
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.is_symlink()} == before


def test_run_files_are_replaced_not_written_through_a_link(tmp_path):
    from rubricgym.trainers.run_files import append_run_line, links_leading_outside, write_run_file

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    (run / "summary.json").symlink_to(victim)
    (run / "metrics.jsonl").symlink_to(victim)
    (run / "inside.json").symlink_to(run / "trajectories")  # a link within the folder is fine
    assert links_leading_outside(run) == [f"metrics.jsonl -> {victim}", f"summary.json -> {victim}"]
    write_run_file(run / "summary.json", "{}")
    assert victim.read_text() == "keep" and not (run / "summary.json").is_symlink()
    assert (run / "summary.json").read_text() == "{}"
    with pytest.raises(OSError):
        append_run_line(run / "metrics.jsonl", "{}")
    assert victim.read_text() == "keep"
