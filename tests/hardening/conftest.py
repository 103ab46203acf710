"""Shared set-up for the hardening tests (hostile files, faults, process state)."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny models gain nothing from threads, and spinning OpenMP threads slow a shared CPU."""
    try:
        import torch
    except ImportError:  # the tests that need torch say so themselves
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
