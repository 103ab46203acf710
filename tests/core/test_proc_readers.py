"""The /proc readers that meter servers: a process tree holds every live descendant (a sandbox's
init adopts orphans under the server), and its CPU seconds are theirs summed."""

from __future__ import annotations

import subprocess
import sys
import time

from rubricgym.servers import pid_alive, process_cpu_seconds, process_tree, tree_cpu_seconds

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\ntime.sleep(60)\n"
PARENT = (f"import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', {BURN!r}])\n"
          "print(child.pid, flush=True)\n" + BURN)


def test_a_tree_holds_the_grandchild_and_sums_its_cpu():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while (process_cpu_seconds(child) or 0) < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        while (process_cpu_seconds(parent.pid) or 0) < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = process_tree(parent.pid)
        assert tree[0] == parent.pid and child in tree
        both = process_cpu_seconds(parent.pid) + process_cpu_seconds(child)
        assert tree_cpu_seconds(parent.pid) >= both >= 0.8  # both burnt 0.4 CPU s, then sleep
        assert process_tree(child) == [child]
    finally:
        parent.kill()
        parent.wait()
        if child is not None:
            subprocess.run(["kill", "-9", str(child)], check=False)
    assert not pid_alive(parent.pid)
    assert process_tree(parent.pid) == [] and tree_cpu_seconds(parent.pid) is None  # gone: nothing to meter
