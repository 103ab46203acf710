"""The README is a front page a newcomer can follow as written (issue 53, item 1):

* at most 120 lines, with an install section;
* every relative link in README.md and docs/performance.md names a file that exists;
* every `make TARGET` it names is a target of the Makefile (or mk/*.mk), and every
  `rubricgym COMMAND` a command of the CLI;
* its Python quick start (the first ```python block) runs as written, with no network,
  and the expert it plays wins the game after the two mistakes;
* its `rubricgym eval` example, from a fresh folder holding the `my_agent.py` its own `printf`
  line writes, passes `--dry-run` (the policy imported and call-checked, the env made).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from requirements_guard import need

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINKED_PAGES = (README, ROOT / "docs" / "performance.md")
MAX_LINES = 120

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
MAKE = re.compile(r"(?:^|[;&|(]\s*)make((?:[ \t]+[a-z][\w.-]*)+)")
COMMAND = re.compile(r"(?:^|[\s/`(])rubricgym[ \t]+([a-z][\w-]*)")
TARGET = re.compile(r"^([A-Za-z][\w.-]*(?:[ \t]+[A-Za-z][\w.-]*)*)[ \t]*:(?!=)", re.MULTILINE)

# Run before the quick start: any connection off this machine fails, so the snippet cannot
# depend on the network (a download, a hub look-up) without this test saying so.
NO_NETWORK = """\
import ipaddress, socket
_connect = socket.socket.connect
def _local_only(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            local = ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = host == "localhost"
        if not local:
            raise OSError(f"test_readme: the quick start tried to reach {address!r}")
    return _connect(self, address)
socket.socket.connect = _local_only
"""
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def readme() -> str:
    return README.read_text(encoding="utf-8")


def code_fragments(text: str) -> list[str]:
    """Every line of every code block (comments dropped) and every inline code span."""
    out = []
    for _, body in CODE_BLOCK.findall(text):
        out += [line.split(" #")[0] for line in body.splitlines()]
    prose = CODE_BLOCK.sub("", text)
    return out + CODE_SPAN.findall(prose)


def shell_block_with(text: str, needle: str) -> list[str]:
    """The commands of the first ```bash block containing ``needle`` (continuations joined,
    comments dropped)."""
    for lang, body in CODE_BLOCK.findall(text):
        if lang == "bash" and needle in body:
            joined = body.replace("\\\n", " ")
            return [c for c in (line.split(" #")[0].strip() for line in joined.splitlines()) if c]
    raise AssertionError(f"README.md has no bash block with {needle!r}")


def test_the_readme_is_short_and_says_how_to_install():
    lines = readme().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES}): move detail to docs/"
    assert "## Install" in lines, "README.md has no '## Install' section"


def test_relative_links_name_files_that_exist():
    missing = []
    for page in LINKED_PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            path = target.split("#")[0]
            if not (page.parent / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: ({target})")
    assert not missing, "links to files that do not exist:\n" + "\n".join(missing)


def test_named_make_targets_and_commands_exist():
    from rubricgym.cli import all_commands

    makefiles = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
    targets = {t for f in makefiles for group in TARGET.findall(f.read_text(encoding="utf-8")) for t in group.split()}
    commands = set(all_commands())
    fragments = code_fragments(readme())
    named_targets = {t for frag in fragments for m in MAKE.findall(frag) for t in m.split()}
    named_commands = {c for frag in fragments for c in COMMAND.findall(frag)}
    assert {"demo", "test", "play", "venv", "setup"} <= named_targets, named_targets
    assert {"eval", "report"} <= named_commands, named_commands
    assert not named_targets - targets, f"README.md names make targets that do not exist: {named_targets - targets}"
    assert not named_commands - commands, f"README.md names rubricgym commands that do not exist: {named_commands - commands}"


def test_the_python_quick_start_runs_as_written(tmp_path):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    blocks = [body for lang, body in CODE_BLOCK.findall(readme()) if lang == "python"]
    assert blocks, "README.md has no ```python block"
    script = tmp_path / "quick_start.py"
    script.write_text(NO_NETWORK + blocks[0], encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=180, env={**os.environ, **OFFLINE}, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) >= 4, done.stdout
    assert "nothing_happens" in lines[2], lines[2]  # "take the moon": an Invalidity operator fired
    assert "engine 1 " in lines[-1], lines[-1]  # the expert's last step wins the game


def test_the_eval_example_passes_a_dry_run_from_a_fresh_folder(tmp_path):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    commands = shell_block_with(readme(), "rubricgym eval")
    writes_agent = next(c for c in commands if "my_agent.py" in c and c.startswith("printf"))
    subprocess.run(["bash", "-c", writes_agent], cwd=tmp_path, check=True, timeout=10)
    assert (tmp_path / "my_agent.py").is_file()
    argv = shlex.split(next(c for c in commands if " eval " in c))
    assert argv[0].endswith("rubricgym") and argv[1] == "eval", argv
    done = subprocess.run([sys.executable, "-m", "rubricgym.cli", *argv[1:], "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180, env={**os.environ, **OFFLINE}, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (tmp_path / "runs").exists(), "a dry run wrote its output folder"
