"""Profiles of a language model at batch shapes it was not profiled on, so that a batch
of another shape gets its own plan under the same byte budget in a fraction of a second.

Note [How a profile scales with the batch shape]
What a stage keeps -- its output, its saved tensors -- is made of tensors whose sizes
are products of the model's dimensions: hidden states B x T x C, the logits
B x T x V, eager attention's weights B x H x T x T, the loss's shifted labels
B x (T + 1), rotary tables T x d, a few scalars. No tensor has two batch dimensions or
three of length T, so each such byte count is a polynomial with whole coefficients
    bytes(B, T) = (c0 + c1 T + c2 T^2) + B (c3 + c4 T + c5 T^2).
optimize() profiles the sample (B0, T0) and five shapes of no more tokens: (B0, T0/2),
(B0, T0/4) and, with B1 = B0/2, (B1, T) for T in {T0, T0/2, T0/4} -- or, for a one-row
sample, B1 = 2 and T in {T0/2, T0/4, T0/8}. Three lengths at each of two batch sizes
fix the six coefficients; a seventh shape, (B1, the mean of its two shorter lengths),
must fall on the law to the byte, and every coefficient must be a whole number of
bytes. The check is at B1, so that bytes are linear in B is the law's assumption,
not something the probes test: no tensor of a decoder has two batch dimensions.
Temporaries follow no such law: a peak of transient buffers switches between terms
as the shape grows, and some depend on the tokens themselves (the embedding's
backward sizes its buffers by the indices it sees), so two batches of one shape can
differ by a few hundred bytes. For a temporary field memopt takes the least value
measured at a probed shape at least as large in B and in T as the new one (and no
less than zero): a bound, as temporaries grow with the batch, not a law.
Times need no exactness: each stage's time is the sample's measured time, scaled by
the ratio a least-squares fit t = a + b B T + c B T^2 over the seven shapes gives
between the new shape and the sample.
A batch with more rows or positions than the sample lies outside the grid, and a model
whose kept bytes fail the check has no law: such a shape is profiled on its first
batch, which takes as long as a profile, not a fraction of a second. So optimize()
should be given the largest batch the training sees (with dynamic padding, the
longest).
"""
import copy
from fractions import Fraction
from typing import Dict, List, Optional, Tuple

import torch

# Profile members that describe the run, not the shape's bytes and times.
_NOT_SCALED = {"format", "version", "model", "device", "link", "measured"}

Shape = Tuple[int, int]


def probe_shapes(batch: int, seq_len: int) -> Optional[List[Shape]]:
    """The six shapes besides the sample that fix the law and check it (the last), or
    None when the sample is too short for three distinct lengths and a fourth. None
    holds more tokens than the sample: a sample of one row is probed at two rows of
    at most half its length."""
    if seq_len < 8 or (batch == 1 and seq_len < 16):
        return None
    if batch >= 2:
        other, lengths = batch // 2, (seq_len, seq_len // 2, seq_len // 4)
    else:
        other, lengths = 2, (seq_len // 2, seq_len // 4, seq_len // 8)
    grid = [(batch, t) for t in (seq_len, seq_len // 2, seq_len // 4)] + [(other, t) for t in lengths]
    return grid[1:] + [(other, 3 * lengths[2] // 2)]


def cut_sample(ids: torch.Tensor, shape: Shape) -> torch.Tensor:
    """A batch of `shape` from the sample's rows and leading positions (rows repeated
    when more are asked for than it has)."""
    batch, seq_len = shape
    rows = ids.repeat(-(-batch // ids.shape[0]), 1) if batch > ids.shape[0] else ids
    return rows[:batch, :seq_len].clone(memory_format=torch.contiguous_format)


def _leaves(j, path=()):
    """(path, value) of every number in a profile that depends on the shape."""
    if isinstance(j, dict):
        for k, v in j.items():
            if not (path == () and k in _NOT_SCALED):
                yield from _leaves(v, path + (k,))
    elif isinstance(j, list):
        for i, v in enumerate(j):
            yield from _leaves(v, path + (i,))
    elif isinstance(j, (int, float)) and not isinstance(j, bool):
        yield path, j


def _byte_basis(shape: Shape):
    b, t = shape
    return [1, t, t * t, b, b * t, b * t * t]


def _time_basis(shape: Shape):
    b, t = shape
    return [1.0, float(b * t), float(b * t * t)]


def _solve_exact(rows: List[List[int]], values: List[int]) -> Optional[List[Fraction]]:
    """The coefficients x of rows x = values, in rationals (Gaussian elimination), or
    None when the rows are singular."""
    n = len(rows)
    a = [[Fraction(x) for x in row] + [Fraction(v)] for row, v in zip(rows, values)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if a[r][col] != 0), None)
        if pivot is None:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col and a[r][col] != 0:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def _path_text(profile: dict, path) -> str:
    if path[0] == "stages" and len(path) > 2:
        name = profile["stages"][path[1]].get("name", path[1])
        return f"stage {name} {'/'.join(map(str, path[2:]))}"
    return "/".join(map(str, path))


def _is_temporary(path) -> bool:
    return "tmp" in str(path[-1])


class ShapeLaw:
    """How one model's profile scales with (B, T) (Note [How a profile scales with the
    batch shape]), from profiles at seven shapes: the sample's first, the one that
    checks the fit last."""

    def __init__(self, profiles: Dict[Shape, dict], sample: Shape):
        self.sample = sample
        self.template = profiles[sample]
        shapes = [sample] + [s for s in profiles if s != sample]
        fit, check = shapes[:-1], shapes[-1]
        leaves = {s: dict(_leaves(profiles[s])) for s in shapes}
        if any(leaves[s].keys() != leaves[sample].keys() for s in shapes):
            raise ValueError("the profiles of the probed shapes have different fields")
        self.temporaries = {s: {p: v for p, v in leaves[s].items() if isinstance(v, int) and _is_temporary(p)}
                            for s in fit}
        self.kept: Dict[tuple, List[Fraction]] = {}
        self.times: Dict[tuple, Tuple[float, List[float]]] = {}
        for path, value in leaves[sample].items():
            if isinstance(value, int) and not _is_temporary(path):
                self.kept[path] = self._fit_kept(path, [leaves[s][path] for s in fit], fit, check,
                                                 leaves[check][path])
            elif isinstance(value, float) and str(path[-1]).endswith("_ms"):
                a = torch.tensor([_time_basis(s) for s in shapes], dtype=torch.float64)
                y = torch.tensor([[float(leaves[s][path])] for s in shapes], dtype=torch.float64)
                self.times[path] = (float(value), torch.linalg.lstsq(a, y).solution.flatten().tolist())

    def _fit_kept(self, path, values, fit, check, checked) -> List[Fraction]:
        coeffs = _solve_exact([_byte_basis(s) for s in fit], values)
        what = _path_text(self.template, path)
        if coeffs is None:
            raise ValueError("the probed shapes do not fix the law")
        if any(c.denominator != 1 for c in coeffs):
            raise ValueError(f"{what} is no polynomial in B and T with whole coefficients over the probed shapes")
        law = sum(c * x for c, x in zip(coeffs, _byte_basis(check)))
        if law != checked:
            raise ValueError(f"{what} is {checked} bytes at B={check[0]}, T={check[1]}, and the law fitted on the "
                             f"other shapes gives {law}")
        return coeffs

    def covers(self, shape: Shape) -> bool:
        """Whether some probed shape is at least as large as `shape` in B and in T."""
        return any(b >= shape[0] and t >= shape[1] for b, t in self.temporaries)

    def _time_at(self, path, shape: Shape) -> float:
        measured, coeffs = self.times[path]
        at_sample = sum(c * x for c, x in zip(coeffs, _time_basis(self.sample)))
        at_shape = sum(c * x for c, x in zip(coeffs, _time_basis(shape)))
        if at_sample <= 0 or at_shape <= 0:  # a fit too noisy to trust: tokens' ratio
            b, t = shape
            return measured * (b * t) / (self.sample[0] * self.sample[1])
        return measured * at_shape / at_sample

    def profile_at(self, shape: Shape) -> dict:
        """The profile at a shape the law covers: kept bytes from the law, temporaries
        bounded by the probed shapes, times scaled from the sample's."""
        if not self.covers(shape):
            raise ValueError(f"the shape {shape} is larger than every probed shape")
        out = copy.deepcopy(self.template)
        for path, coeffs in self.kept.items():
            _set(out, path, int(sum(c * x for c, x in zip(coeffs, _byte_basis(shape)))))
        above = [s for s in self.temporaries if s[0] >= shape[0] and s[1] >= shape[1]]
        for path in self.temporaries[self.sample]:
            # A negative temporary (a backward that frees before it peaks) shrinks as
            # the shape does, so no larger shape bounds it: none is assumed.
            _set(out, path, max(0, min(self.temporaries[s][path] for s in above)))
        for path in self.times:
            _set(out, path, self._time_at(path, shape))
        model = out.setdefault("model", {})
        model["batch"], model["seq_len"] = shape
        model["scaled_from"] = {"batch": self.sample[0], "seq_len": self.sample[1]}
        return out


def _set(j, path, value):
    for key in path[:-1]:
        j = j[key]
    j[path[-1]] = value
