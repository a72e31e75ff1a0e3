"""The CPU testbed's device memory, as memopt measures it: the bytes live tensors
occupy (allocated, what plans count), their peak since reset_peak(), and the cache the
allocator keeps like a GPU's caching allocator (empty_cache returns it)."""
from . import _core


def current_bytes() -> int:
    return _core.current_bytes()


def peak_bytes() -> int:
    return _core.peak_bytes()


def reset_peak() -> None:
    _core.reset_peak()


def empty_cache() -> None:
    _core.empty_cache()
