"""The (estimator, seed) run names a study and the seed benchmarks write and read back, and a
run forked from another run's checkpoint."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rubricgym.trainers.run_files import fork_run, parse_seed_run_name, seed_run_name

labels = st.text(st.characters(categories=("Ll", "Lu", "Nd"), include_characters="-_+."), min_size=1, max_size=20)


@given(labels, st.integers(min_value=0, max_value=10**6))
def test_a_run_name_reads_back_as_its_label_and_seed(label, seed):
    assert parse_seed_run_name(seed_run_name(label, seed)) == (label, seed)


def test_other_names_are_not_runs():
    for name in ("warm-start", "trca", "trca-seed", "trca-seedx", "-seed3x", "summary.json"):
        assert parse_seed_run_name(name) is None
    assert parse_seed_run_name("grpo-seed-seed2") == ("grpo-seed", 2)


def test_a_fork_copies_the_named_files_and_the_checkpoint_and_replaces_what_was_there(tmp_path: Path):
    source = tmp_path / "warm-start"
    checkpoint = source / "checkpoint-000000"
    (checkpoint / "adapter").mkdir(parents=True)
    (checkpoint / "adapter" / "weights").write_bytes(b"\x00\x01")
    (source / "config.yaml").write_text("run: {}\n")
    (source / "warmup.json").write_text("{}")
    (source / "metrics.jsonl").write_text("{}\n")
    dest = tmp_path / "trca-seed0"
    (dest / "checkpoint-000009").mkdir(parents=True)  # a stale run in the way

    assert fork_run(source, checkpoint, dest, ("config.yaml", "warmup.json")) == dest
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "checkpoint-000000", "checkpoint-000000/adapter", "checkpoint-000000/adapter/weights",
        "config.yaml", "warmup.json"]
    assert (dest / "checkpoint-000000" / "adapter" / "weights").read_bytes() == b"\x00\x01"
    assert (source / "metrics.jsonl").is_file()  # the source is only read
