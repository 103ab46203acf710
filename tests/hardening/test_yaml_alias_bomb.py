"""A YAML alias bomb (issue 54, item 4): nested anchors and aliases parse fast but expand when
the value is walked; every reader refuses them while parsing, in well under a second."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from rubricgym.yaml_files import YamlFileError, parse_yaml


def bomb(levels: int = 9, width: int = 9) -> str:
    """The classic shape: level k is a list of ``width`` aliases of level k-1."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for k in range(1, levels):
        lines.append(f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_the_bomb_is_refused_by_every_reader_before_it_expands(tmp_path):
    text = bomb()  # 9^9 = 387M strings once expanded
    assert len(text) < 1000
    path = tmp_path / "library.yaml"
    path.write_text(text)
    started = time.process_time()
    # a fresh process per command: the library tools, the trainer's config, the rubric reader
    for command in (["library", "validate", str(path)], ["train", "--config", str(path), "--print-config"]):
        done = subprocess.run([sys.executable, "-m", "rubricgym.cli", *command], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "anchors and aliases are not accepted (line 1: anchor &a0)" in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
    from rubricgym.judges.rubric import load_rubric
    from rubricgym.trainers.config import load_config

    for reader in (load_config, load_rubric):
        with pytest.raises(ValueError, match="anchors and aliases are not accepted"):
            reader(path)
    assert time.process_time() - started < 5.0  # this process's own reads: milliseconds, not minutes


@pytest.mark.parametrize(("text", "line", "what"), [
    ("a: 1\nb: &x {c: 1}\n", 2, "anchor &x"),
    ("defaults: &d {lr: 1}\nrun:\n  <<: *d\n", 1, "anchor &d"),
    ("a: *nowhere\n", 1, "alias *nowhere"),
])
def test_anchors_aliases_and_merge_keys_name_the_line(text, line, what):
    message = f"x.yaml: YAML anchors and aliases are not accepted (line {line}: {what})"
    with pytest.raises(YamlFileError, match=re.escape(message)):
        parse_yaml(text, "x.yaml")
    assert parse_yaml("a: '&not an anchor'\nb: '*nor an alias'\n", "x.yaml") == {"a": "&not an anchor",
                                                                              "b": "*nor an alias"}
