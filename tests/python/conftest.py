"""Fixtures the Python tests share."""
import pytest
import torch


@pytest.fixture
def one_thread():
    """One compute thread, as the testbed measures and as bit-for-bit comparisons need
    (the same kernels, the same reduction order)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
