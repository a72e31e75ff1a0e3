"""Fixtures the Python tests share."""
import gc

import pytest
import torch

from memopt._api import _measuring


@pytest.fixture
def one_thread():
    """One compute thread, as the testbed measures and as bit-for-bit comparisons need
    (the same kernels, the same reduction order)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="module")
def collected_before():
    """The garbage of earlier test files collected before each file (a collection costs
    a fraction of a second in a process that imported torch: once per file)."""
    gc.collect()


@pytest.fixture(autouse=True)
def no_collection_inside():
    """The collector off while a test runs: a measured step's peak above its baseline
    must not fall because a model dropped earlier (an optimized one too: Note [A chain
    holds its model weakly]) happened to be freed inside it, as memopt's profiles keep it
    off (Note [No collection inside a measurement]). Tests of what is freed collect
    explicitly."""
    with _measuring():
        yield
