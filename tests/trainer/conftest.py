import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny models gain nothing from threads, and spinning OpenMP threads slow a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
