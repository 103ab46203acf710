"""Suite-wide settings: hypothesis profile, and how tests share the machine's cores.

``make test`` runs the suite on one pytest-xdist worker per core (``--dist loadgroup``).
Tests that start several busy processes of their own (2-rank training runs, env worker
pools, parallel studies) are put in one xdist group, so they run one at a time on one
worker and never oversubscribe the cores (their collective time-outs stay meaningful);
every other test is spread over the workers. Each worker's torch runs one thread.
"""

import os
from pathlib import Path

import pytest
import trainer.word_env  # noqa: F401  (registers the tests' env factories: env.factory=word, expert-word, trca-word)
from cpu_times import ENV_VAR, Clock, record
from hypothesis import HealthCheck, settings
from redaction_isolation import own_registry

# Under CI every property test is derandomized (its examples are a function of the test alone):
# a submission never fails on an example no change of its own produced. Elsewhere the examples
# vary from run to run (the "dev" profile), so a developer's runs keep searching.
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True, derandomize=True
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile("ci" if IN_CI else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# files (relative to tests/) whose tests each start several processes that compute at once
MULTI_PROCESS_FILES = ("trainer/test_distributed.py", "trainer/test_env_workers.py",
                       "remote/test_sessions.py",  # 32 remote sessions over a server's 2 worker processes
                       "integrations/test_trl_multiprocess.py")  # TRL under accelerate launch, 2 processes
MULTI_PROCESS_TESTS = ("trainer/test_study.py::test_parallel_study_gives_the_serial_study_s_rows",)
MULTI_PROCESS_GROUP = "several-processes"

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one OpenMP thread per worker (the trainer reads it too): two workers already fill two cores
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _own_redaction_set():
    """Each test starts with an empty redaction set (tests/redaction_isolation.py says why)."""
    with own_registry():
        yield


def pytest_itemcollected(item: pytest.Item) -> None:
    # marked as each test is collected, before any pytest_collection_modifyitems (xdist's, which
    # turns the marks into groups, runs ahead of a conftest's modifyitems hook in its workers)
    root = item.config.rootpath / "tests"
    name = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
    if name in MULTI_PROCESS_FILES or f"{name}::{item.originalname}" in MULTI_PROCESS_TESTS:
        item.add_marker(pytest.mark.xdist_group(MULTI_PROCESS_GROUP))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    folder = os.environ.get(ENV_VAR)  # each test's CPU seconds (tests/cpu_times.py), when asked
    start = Clock.now() if folder else None
    yield
    if start is not None:
        record(Path(folder), item.nodeid, start, Clock.now())
