"""The device memory memopt measures, on the CPU testbed or a CUDA GPU: the bytes live
tensors asked for (what plans count), their peak since reset_peak(), and the cache the
allocator keeps (empty_cache returns it).

device "cpu" (the default): the counting, caching testbed allocator, installed by the
first call (Note [One testbed allocator per process]); "cuda" or "cuda:N": the CUDA
caching allocator's requested bytes -- the request to the byte, not the rounded
blocks its allocated bytes count."""
import torch

from . import _core


def _cuda(device):
    d = torch.device(device)
    if d.type == "cpu":
        return None
    if d.type != "cuda":
        raise ValueError(f"memopt.testbed: device {d} is neither the CPU nor a CUDA GPU")
    return d


def current_bytes(device="cpu") -> int:
    d = _cuda(device)
    if d is None:
        return _core.current_bytes()
    return torch.cuda.memory_stats(d).get("requested_bytes.all.current", 0)


def peak_bytes(device="cpu") -> int:
    d = _cuda(device)
    if d is None:
        return _core.peak_bytes()
    return torch.cuda.memory_stats(d).get("requested_bytes.all.peak", 0)


def reset_peak(device="cpu") -> None:
    d = _cuda(device)
    if d is None:
        _core.reset_peak()
    else:
        torch.cuda.reset_peak_memory_stats(d)


def empty_cache(device="cpu") -> None:
    d = _cuda(device)
    if d is None:
        _core.empty_cache()
    else:
        torch.cuda.empty_cache()
