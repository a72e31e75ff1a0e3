#!/usr/bin/env python3
"""copy_placement_milp.py: the fastest placement of copies and waits around a fixed
sequence of compute ops, found by a mixed-integer program on HiGHS (`highspy`).

    python tools/copy_placement_milp.py --profile P.json --schedule S.json [--out S2.json]
                                        [--time-limit 60]

It keeps the compute ops of S (fwd_keep, fwd_ckpt, fwd_drop, loss, bwd) in their order
and chooses everything else again: which activations a_k and saved states ā_k move to
the host, where each offload, prefetch, offload_saved, prefetch_saved, offload_input and
prefetch_input is issued,
and where wait_offloads goes. It prints S's time, the best time of that space and the
solver's lower bound, and writes the best plan with --out. It is a check of the
offload solver: docs/formats.md, "The placement check" says what it covers and what it does not.

Note [The placement MILP]
The space is every op sequence with S's compute ops, in order, that the timeline
simulator (docs/formats.md, "Offload: the timeline simulator") accepts, under the exhaustive oracle's rule
that each a_k and each ā_k moves at most once each way, with at most one
wait_offloads between two compute ops. Copies are issued in gaps: gap g is the
place just before compute op g, split into phase A and, after the gap's wait,
phase B. Within a phase the d2h copies come first (the links are independent, and a
prefetch must follow its offload), each link in the order the solver picks.

 - A move of a tensor lies between two consecutive compute ops that touch it (its
   creator or readers, or the op that frees it): the simulator refuses an op that
   reads data on the host or computes it again. A plain a_k is never moved with
   `offload` while ā_{k+1} holds it (Note [A kept stage keeps its input] in
   solver/chain/simulate.h); from the fwd_keep k that bwd k uses to bwd k it may leave with
   `offload_input` (Note [A kept stage's input may leave]).
 - Times are exact, not bounds. A compute op starts at the maximum of the end of the
   op before it (or the gap's wait) and the ends of the prefetches it reads; a copy
   starts at the maximum of its issue, the end of the copy before it on its link,
   and (a prefetch) its offload's end; a wait ends at the maximum of its issue and
   the end of every offload issued before it. A bound alone would let the solver
   start an op late so that a copy frees its bytes first, which no schedule can do:
   so each maximum picks its term with a binary ("selection").
 - Memory is checked where it can peak: at every compute op's start and after the
   prefetches of each phase, the only allocations. A moved tensor of b bytes counts
   (1 + issued - ended) b there: once before its offload, twice while its prefetch
   and its still running offload both hold bytes, not at all between the end of its
   offload and its prefetch. "ended" is a binary that may be 1 only if the offload's
   copy ended at or before that instant (a copy that ends as an op starts frees
   first, as in the simulator); the solver sets it where it helps.
The chain may not carry bytes (Note [Carried bytes] in solver/chain/chain.h), as for the
oracle. With integer times and copy times the solution is exact; every plan it
returns is checked against memopt's simulator by the caller.
"""

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

COMPUTE = ("fwd_keep", "fwd_ckpt", "fwd_drop", "loss", "bwd")
COPIES = ("offload", "prefetch", "offload_saved", "prefetch_saved", "offload_input", "prefetch_input", "wait_offloads")
# The copy words of each kind of moved tensor: a plain a_k, the saved state of ā_k
# beyond a_k, a kept stage's input a_k (docs/formats.md, "Copy ops").
MOVE_WORDS = {"a": ("offload", "prefetch"), "abar": ("offload_saved", "prefetch_saved"),
              "in": ("offload_input", "prefetch_input")}


@dataclass
class Chain:
    """The chain of docs/formats.md, 'The chain model' in exact bytes and ms (no carried bytes)."""
    L: int
    x: List[int]          # x[k], k in 0..L
    xbar: List[int]       # xbar[k], k in 1..L (xbar[0] = 0)
    uf: List[float]
    uf_nograd: List[float]
    ub: List[float]       # ub[i], i in 0..L (the loss is L)
    ub_pair: List[float]  # bwd i right after fwd_keep i (docs/formats.md, "A stage run back to back")
    ftmp: List[int]
    ftmp_keep: List[int]
    btmp: List[int]       # 0..L
    d2h_ms_per_byte: float
    h2d_ms_per_byte: float


def chain_from_profile(profile: dict, where: str = "the profile") -> Chain:
    stages = profile.get("stages")
    if not isinstance(stages, list) or not stages:
        raise ValueError(f"{where}: `stages` must be a non-empty array")
    link = profile.get("link")
    if not link:
        raise ValueError(f"{where}: no `link`: nothing can be offloaded, so there is no copy to place; add "
                         "`\"link\": {\"d2h_bytes_per_s\": ..., \"h2d_bytes_per_s\": ...}`")
    for s, stage in enumerate(stages):
        if stage.get("carried_bytes", 0):
            raise ValueError(f"{where}: stages[{s}] ({stage.get('name')}) has carried_bytes; the placement MILP "
                             "takes only chains without carried bytes")
    loss = profile.get("loss") or {}
    L = len(stages)
    uf = [float(s["fwd_ms"]) for s in stages]
    uf_nograd = [float(s.get("fwd_nograd_ms", s["fwd_ms"])) for s in stages]
    ub = [float(s["bwd_ms"]) for s in stages]
    # The pair less its forward; recomputing a stage back to back never beats keeping it.
    ub_pair = [max(float(s["fwd_bwd_pair_ms"]) - uf[i], ub[i] - uf_nograd[i], 0.0) if "fwd_bwd_pair_ms" in s else ub[i]
               for i, s in enumerate(stages)]
    return Chain(
        L=L,
        x=[int(profile["input_bytes"])] + [int(s["out_bytes"]) for s in stages],
        xbar=[0] + [int(s["saved_bytes"]) for s in stages],
        uf=uf,
        uf_nograd=uf_nograd,
        ub=ub + [float(loss.get("bwd_ms", 0.0))],
        ub_pair=ub_pair,
        ftmp=[int(s["fwd_tmp_bytes"]) for s in stages],
        ftmp_keep=[int(s.get("fwd_keep_tmp_bytes", s["fwd_tmp_bytes"])) for s in stages],
        btmp=[int(s["bwd_tmp_bytes"]) for s in stages] + [int(loss.get("bwd_tmp_bytes", 0))],
        d2h_ms_per_byte=1000.0 / float(link["d2h_bytes_per_s"]),
        h2d_ms_per_byte=1000.0 / float(link["h2d_bytes_per_s"]),
    )


Op = Tuple[str, int]  # ("bwd", 3), ("loss", -1)


def parse_ops(schedule: dict) -> List[Op]:
    ops = []
    for n, op in enumerate(schedule["ops"]):
        if not isinstance(op, list) or not op or op[0] not in COMPUTE + COPIES:
            raise ValueError(f"ops[{n}] is {op!r}: expected [\"word\", index] or [\"loss\"] with a word of "
                             "docs/formats.md, 'Ops'")
        ops.append((op[0], int(op[1]) if len(op) > 1 else -1))
    return ops


def compute_ops_of(ops: List[Op]) -> List[Op]:
    return [op for op in ops if op[0] in COMPUTE]


@dataclass
class Walk:
    """The compute ops alone, as the timeline simulator sees them without copies."""
    dur_ms: List[float]
    start_bytes: List[int]      # the device total at op n's start event (its add and transient included)
    after_end_bytes: List[int]  # the device total after op n's end event


@dataclass
class Move:
    """One tensor that may make one round trip inside one quiet stretch of its life."""
    tensor: Tuple[str, int]     # ("a", k), ("abar", k) or ("in", k): a key of MOVE_WORDS
    bytes: int
    lo_gap: int                 # its offload and prefetch go in gaps lo_gap .. hi_gap
    hi_gap: int                 # hi_gap is the compute op that next reads it
    d2h_ms: float
    h2d_ms: float


def walk(chain: Chain, compute: List[Op], kept_inputs: bool = True) -> Tuple[Walk, List[Move]]:
    """The compute-only memory walk (docs/formats.md, 'Operations and memory without offload: the sequential simulator' and 'Offload: the timeline simulator', no carried bytes)
    and every stretch in which a tensor could leave the device (a kept stage's input
    only with `kept_inputs`)."""
    L = chain.L
    plain = [False] * (L + 2)
    saved = [False] * (L + 2)
    plain[0] = True
    total = chain.x[0]
    w = Walk([], [], [])
    last_touch: Dict[int, int] = {0: -1}   # plain a_k: the last op that touched it while resident
    kept_input: Dict[int, bool] = {0: False}  # whether that op was fwd_keep k (ā_{k+1} then holds a_k)
    saved_from: Dict[int, int] = {}
    moves: List[Move] = []

    def plain_touch(k: int, n: int, frees: bool):
        if k in last_touch and not kept_input[k] and chain.x[k] > 0:
            moves.append(Move(("a", k), chain.x[k], last_touch[k] + 1, n, chain.x[k] * chain.d2h_ms_per_byte,
                              chain.x[k] * chain.h2d_ms_per_byte))
        if frees:
            last_touch.pop(k, None)
            kept_input.pop(k, None)
        else:
            last_touch[k] = n
            kept_input[k] = False

    grad = [False] * (L + 2)
    grad_done = False
    last_keep = -1  # the last compute op's stage, when it was a fwd_keep

    def refuse(n, why):
        raise ValueError(f"compute op {n} ({compute[n][0]} {compute[n][1]}): {why}; the MILP takes the compute ops "
                         "of a valid schedule")

    for n, (kind, i) in enumerate(compute):
        remove = 0
        if kind != "loss" and not 0 <= i < L:
            refuse(n, f"no stage {i} in a chain of {L}")
        if kind in ("fwd_keep", "fwd_ckpt", "fwd_drop"):
            if not (plain[i] or (saved[i] and kind != "fwd_drop")):
                refuse(n, f"its input a_{i} is not resident")
            if plain[i + 1] or saved[i + 1]:
                refuse(n, f"a_{i + 1} is already resident")
        elif kind == "loss":
            if not (plain[L] or saved[L]) or grad_done:
                refuse(n, "needs a_L and runs once")
            grad_done = grad[L] = True
        elif not (grad[i + 1] and saved[i + 1] and (plain[i] or saved[i])):
            refuse(n, f"needs d_{i + 1}, ā_{i + 1} and a_{i}")
        if kind in ("fwd_keep", "fwd_ckpt", "fwd_drop"):
            if plain[i]:
                plain_touch(i, n, frees=(kind == "fwd_drop"))
                if kind == "fwd_keep":
                    kept_input[i] = True
            if kind == "fwd_keep":
                add, tmp, dur = chain.xbar[i + 1], chain.ftmp_keep[i], chain.uf[i]
                saved[i + 1] = True
                saved_from[i + 1] = n
            else:
                add, tmp, dur = chain.x[i + 1], chain.ftmp[i], chain.uf_nograd[i]
                plain[i + 1] = True
                last_touch[i + 1] = n
                kept_input[i + 1] = False
                if kind == "fwd_drop":
                    plain[i] = False
                    remove += chain.x[i]
        elif kind == "loss":
            add, tmp, dur = chain.x[L], chain.btmp[L], chain.ub[L]
            if plain[L]:
                plain_touch(L, n, frees=True)
                plain[L] = False
                remove += chain.x[L]
        elif kind == "bwd":
            add, tmp, dur = chain.x[i], chain.btmp[i], chain.ub_pair[i] if last_keep == i else chain.ub[i]
            extra = chain.xbar[i + 1] - chain.x[i + 1]
            if extra > 0:
                moves.append(Move(("abar", i + 1), extra, saved_from[i + 1] + 1, n, extra * chain.d2h_ms_per_byte,
                                  extra * chain.h2d_ms_per_byte))
            if kept_inputs and chain.x[i] > 0:  # its input, held from its fwd_keep on (offload_input)
                moves.append(Move(("in", i), chain.x[i], saved_from[i + 1] + 1, n, chain.x[i] * chain.d2h_ms_per_byte,
                                  chain.x[i] * chain.h2d_ms_per_byte))
            remove += chain.x[i + 1] + chain.xbar[i + 1]
            saved[i + 1] = grad[i + 1] = False
            grad[i] = True
            if plain[i]:
                plain_touch(i, n, frees=True)
                plain[i] = False
                remove += chain.x[i]
        else:
            raise ValueError(f"not a compute op: {kind}")
        w.dur_ms.append(dur)
        last_keep = i if kind == "fwd_keep" else -1
        w.start_bytes.append(total + add + tmp)
        total += add - remove
        w.after_end_bytes.append(total)
    if not grad[0] or any(plain) or any(saved) or any(grad[1:]):
        raise ValueError("the compute ops do not end with d_0 alone resident; the MILP takes the compute ops of a "
                         "valid schedule")
    return w, moves


# Note [Bytes in units]
# Real profiles count bytes in the billions, and a solver's tolerances are relative to
# its coefficients: a total a few bytes over the budget could pass. Every device total
# is a sum of the chain's byte counts, so it is a multiple of their greatest common
# divisor; counted in that unit (GPT-2's tensors share large powers of two), the rows
# hold small integers, and "total <= budget" is "total <= floor(budget / unit)".
def byte_unit(chain: Chain) -> int:
    unit = 0
    for v in chain.x + chain.xbar + chain.ftmp + chain.ftmp_keep + chain.btmp:
        unit = math.gcd(unit, abs(int(v)))
    return max(unit, 1)


class Model:
    """Columns (bounds, integrality, cost) and rows (lo <= sum coef * col <= hi) for highspy."""

    def __init__(self):
        self.lb: List[float] = []
        self.ub: List[float] = []
        self.cost: List[float] = []
        self.integer: List[bool] = []
        self.rows: List[Tuple[float, float, Dict[int, float]]] = []
        self.offset = 0.0  # added to the objective

    def var(self, lb=0.0, ub=float("inf"), integer=False) -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.cost.append(0.0)
        self.integer.append(integer)
        return len(self.lb) - 1

    def binary(self) -> int:
        return self.var(0.0, 1.0, True)

    def row(self, terms: Dict[int, float], lo=-float("inf"), hi=float("inf")):
        clean: Dict[int, float] = {}
        for c, v in terms.items():
            if v != 0:
                clean[c] = clean.get(c, 0.0) + v
        self.rows.append((lo, hi, clean))


def add(*parts: Dict[int, float]) -> Dict[int, float]:
    """The sum of linear terms {col: coef}."""
    out: Dict[int, float] = {}
    for p in parts:
        for c, v in p.items():
            out[c] = out.get(c, 0.0) + v
    return out


def scale(d: Dict[int, float], s: float) -> Dict[int, float]:
    return {c: v * s for c, v in d.items()}


@dataclass
class Built:
    """The model and the columns that decode it."""
    model: Model
    compute: List[Op]
    moves: List[Move]
    n_gaps: int
    waits: List[int]
    off: List[Dict[int, int]]    # per move: position -> binary
    pre: List[Dict[int, int]]
    moved: List[int]
    off_start: List[int]
    pre_start: List[int]
    gap_ms: List[int]            # per gap: its time after its wait
    issue_ms: List[Tuple[Optional[int], float]]  # per gap: (column, constant) of its time before the wait


def build(chain: Chain, compute: List[Op], budget_bytes: int, kept_inputs: bool = True) -> Built:
    w, moves = walk(chain, compute, kept_inputs)
    N = len(compute)
    m = Model()
    big = sum(w.dur_ms) + sum(mv.d2h_ms + mv.h2d_ms for mv in moves) + 1.0
    unit = byte_unit(chain)
    # Compute starts, gap times.
    S = [m.var() for _ in range(N)]
    J = [m.var() for _ in range(N)]   # the gap's time after its wait (I_g without one)
    wait = [m.binary() for _ in range(N)]

    def I(g) -> Dict[int, float]:  # the end of compute op g-1 as a linear expression (a constant 0 for g = 0)
        return {} if g == 0 else {S[g - 1]: 1.0}

    def I_const(g) -> float:
        return 0.0 if g == 0 else w.dur_ms[g - 1]

    def pos_time(p) -> Tuple[Dict[int, float], float]:
        g, phase = divmod(p, 2)
        return ({J[g]: 1.0}, 0.0) if phase else (I(g), I_const(g))

    # Moves.
    off: List[Dict[int, int]] = []
    pre: List[Dict[int, int]] = []
    moved: List[int] = []
    O, Q, iss_o, iss_p = [], [], [], []
    for mv in moves:
        positions = range(2 * mv.lo_gap, 2 * mv.hi_gap + 2)
        off.append({p: m.binary() for p in positions})
        pre.append({p: m.binary() for p in positions})
        moved.append(m.binary())
        O.append(m.var())
        Q.append(m.var())
        iss_o.append(m.var())
        iss_p.append(m.var())
    for t, mv in enumerate(moves):
        m.row(add({moved[t]: -1.0}, {c: 1.0 for c in off[t].values()}), 0, 0)
        m.row(add({moved[t]: -1.0}, {c: 1.0 for c in pre[t].values()}), 0, 0)
        # The prefetch is issued no earlier than the offload.
        m.row(add({c: float(p) for p, c in pre[t].items()}, {c: -float(p) for p, c in off[t].items()}), 0)
        for p in off[t]:
            if p % 2:  # phase B exists only with a wait
                m.row({off[t][p]: 1.0, wait[p // 2]: -1.0}, hi=0)
                m.row({pre[t][p]: 1.0, wait[p // 2]: -1.0}, hi=0)
            expr, const = pos_time(p)
            for issue, choice in ((iss_o[t], off[t][p]), (iss_p[t], pre[t][p])):
                # issue = time(p) when chosen
                m.row(add({issue: 1.0}, scale(expr, -1.0), {choice: -big}), lo=const - big)
                m.row(add({issue: 1.0}, scale(expr, -1.0), {choice: big}), hi=const + big)
    # At most one move of each tensor.
    by_tensor: Dict[Tuple[str, int], List[int]] = {}
    for t, mv in enumerate(moves):
        by_tensor.setdefault(mv.tensor, []).append(t)
    for ts in by_tensor.values():
        if len(ts) > 1:
            m.row({moved[t]: 1.0 for t in ts}, hi=1)

    def exact_max(target, terms, active):
        """target <= the chosen term, each term (expression, constant, conditions) chosen
        only where every condition expression is 1; one term is chosen when `active` is
        1 (None: always). The caller adds target >= every term that applies."""
        sels = []
        for expr, const, conditions in terms:
            s = m.binary()
            sels.append(s)
            m.row(add({target: 1.0}, scale(expr, -1.0), {s: big}), hi=const + big)
            for cond in conditions:
                m.row(add({s: 1.0}, scale(cond, -1.0)), hi=0)
        if active is None:
            m.row({s: 1.0 for s in sels}, 1, 1)
        else:
            m.row(add({s: 1.0 for s in sels}, {active: -1.0}), 0, 0)

    pos_big = 2.0 * N + 2

    def link(starts, issues, durations, places, own_terms):
        """One link: copies run one at a time in issue order, each starting at the
        exact maximum of its issue, its own terms and the end of the copy before it."""
        order: Dict[Tuple[int, int], int] = {}
        pos = [{c: float(p) for p, c in places[t].items()} for t in range(len(moves))]
        for b_ in range(len(moves)):
            m.row({starts[b_]: 1.0, issues[b_]: -1.0}, lo=0)
            terms = [({issues[b_]: 1.0}, 0.0, [])] + own_terms(b_)
            for a in range(len(moves)):
                if a == b_ or moves[a].tensor == moves[b_].tensor:
                    continue
                lo_a, hi_a = 2 * moves[a].lo_gap, 2 * moves[a].hi_gap + 1
                lo_b, hi_b = 2 * moves[b_].lo_gap, 2 * moves[b_].hi_gap + 1
                if hi_b < lo_a:
                    continue  # a is always issued after b
                conditions = [{moved[a]: 1.0}]
                slack = {moved[a]: -big, moved[b_]: -big}
                if hi_a >= lo_b:  # either may come first
                    if (a, b_) not in order:
                        first, second = m.binary(), m.binary()
                        order[(a, b_)], order[(b_, a)] = first, second
                        m.row({first: 1.0, second: 1.0}, 1, 1)
                        # a issued at a later position is never first; at an earlier one, always
                        m.row(add(pos[b_], scale(pos[a], -1.0), {first: -pos_big}), hi=0)
                        m.row(add(pos[a], scale(pos[b_], -1.0), {second: -pos_big}), hi=0)
                    conditions.append({order[(a, b_)]: 1.0})
                    slack[order[(a, b_)]] = -big
                # start_b >= end_a when both move and a comes first
                m.row(add({starts[b_]: 1.0, starts[a]: -1.0}, slack), lo=durations[a] - big * len(slack))
                terms.append(({starts[a]: 1.0}, durations[a], conditions))
            exact_max(starts[b_], terms, moved[b_])

    link(O, iss_o, [mv.d2h_ms for mv in moves], off, lambda t: [])
    # A prefetch also waits for its own offload to end.
    for t, mv in enumerate(moves):
        m.row({Q[t]: 1.0, O[t]: -1.0}, lo=mv.d2h_ms)
    link(Q, iss_p, [mv.h2d_ms for mv in moves], pre, lambda t: [({O[t]: 1.0}, moves[t].d2h_ms, [])])

    # Waits: J_g = I_g, or with a wait the maximum of I_g and the ends of the offloads
    # issued before it (at or before phase A of gap g).
    for g in range(N):
        m.row(add({J[g]: 1.0}, scale(I(g), -1.0)), lo=I_const(g))
        m.row(add({J[g]: 1.0}, scale(I(g), -1.0), {wait[g]: -big}), hi=I_const(g))
        terms = [(I(g), I_const(g), [])]
        for t, mv in enumerate(moves):
            issued = {c: 1.0 for p, c in off[t].items() if p <= 2 * g}
            if not issued:
                continue
            m.row(add({J[g]: 1.0, O[t]: -1.0}, scale(issued, -big), {wait[g]: -big}), lo=mv.d2h_ms - 2 * big)
            terms.append(({O[t]: 1.0}, mv.d2h_ms, [issued]))
        exact_max(J[g], terms, None)

    # Compute starts: S_n = max(J_n, ends of the prefetches op n reads).
    for n in range(N):
        m.row({S[n]: 1.0, J[n]: -1.0}, lo=0)
        terms = [({J[n]: 1.0}, 0.0, [])]
        for t, mv in enumerate(moves):
            if mv.hi_gap == n:
                m.row({S[n]: 1.0, Q[t]: -1.0, moved[t]: -big}, lo=mv.h2d_ms - big)
                terms.append(({Q[t]: 1.0}, mv.h2d_ms, [{moved[t]: 1.0}]))
        exact_max(S[n], terms, None)

    # Memory at every allocation instant.
    def memory_row(base: int, at_expr: Dict[int, float], at_const: float, issued_before, offload_before, in_range):
        terms: Dict[int, float] = {}
        for t, mv in enumerate(moves):
            if not in_range(mv):
                continue
            pi = [c for p, c in pre[t].items() if issued_before(p)]
            oi = [c for p, c in off[t].items() if offload_before(p)]
            for c in pi:
                terms[c] = terms.get(c, 0.0) + mv.bytes // unit
            if oi:
                ended = m.binary()
                terms[ended] = -float(mv.bytes // unit)
                m.row(add({ended: 1.0}, {c: -1.0 for c in oi}), hi=0)
                # ended => O_t + d2h <= at
                m.row(add({O[t]: 1.0, ended: big}, scale(at_expr, -1.0)), hi=at_const - mv.d2h_ms + big)
        # Every device total is a multiple of `unit`, so this is exact (Note [Bytes in units]).
        m.row(terms, hi=budget_bytes // unit - base // unit)

    for n in range(N):
        memory_row(w.start_bytes[n], {S[n]: 1.0}, 0.0, lambda p: p <= 2 * n + 1, lambda p: p <= 2 * n + 1,
                   lambda mv: mv.lo_gap <= n < mv.hi_gap)
    for g in range(N):
        base = chain.x[0] if g == 0 else w.after_end_bytes[g - 1]
        memory_row(base, I(g), I_const(g), lambda p: p <= 2 * g, lambda p: p <= 2 * g - 1,
                   lambda mv: mv.lo_gap <= g <= mv.hi_gap)
        memory_row(base, {J[g]: 1.0}, 0.0, lambda p: p <= 2 * g + 1, lambda p: p <= 2 * g,
                   lambda mv: mv.lo_gap <= g <= mv.hi_gap)

    # The objective is the step's time: the end of the last compute op (every copy ends
    # before the op that reads its data starts).
    m.cost[S[N - 1]] = 1.0
    m.offset = w.dur_ms[N - 1]
    issue = [(None if g == 0 else S[g - 1], I_const(g)) for g in range(N)]
    return Built(m, compute, moves, N, wait, off, pre, moved, O, Q, J, issue)


def decode(b: Built, values: List[float]) -> List[Op]:
    """The op sequence of a solution: per gap, phase A's offloads and prefetches in link
    order, the wait, phase B's, then the compute op. A wait that waits for nothing is
    left out: without it, phase B's copies issue at the same instant, in the same order."""
    def on(c):
        return values[c] > 0.5

    def waits_for_something(g):
        column, const = b.issue_ms[g]
        return values[b.gap_ms[g]] > const + (0.0 if column is None else values[column]) + 1e-6

    ops: List[Op] = []
    for g in range(b.n_gaps):
        for phase in (0, 1):
            p = 2 * g + phase
            if phase == 1 and on(b.waits[g]) and waits_for_something(g):
                ops.append(("wait_offloads", -1))
            offs = [t for t in range(len(b.moves)) if p in b.off[t] and on(b.off[t][p])]
            pres = [t for t in range(len(b.moves)) if p in b.pre[t] and on(b.pre[t][p])]
            for t in sorted(offs, key=lambda t: values[b.off_start[t]]):
                kind, k = b.moves[t].tensor
                ops.append((MOVE_WORDS[kind][0], k))
            for t in sorted(pres, key=lambda t: values[b.pre_start[t]]):
                kind, k = b.moves[t].tensor
                ops.append((MOVE_WORDS[kind][1], k))
        ops.append(b.compute[g])
    return ops


def placement_of(b: Built, ops: List[Op]) -> Optional[Dict[int, float]]:
    """Column bounds that fix the MILP to the copies and waits of `ops` (whose compute
    ops are b's), or None when `ops` lies outside the space: two waits in one gap, or
    a round trip that no stretch of the space holds."""
    gap, phase = 0, 0
    placed: Dict[Tuple[str, int], Dict[str, int]] = {}
    waits = set()
    for kind, k in ops:
        if kind in COMPUTE:
            gap, phase = gap + 1, 0
        elif kind == "wait_offloads":
            if phase == 1:
                return None
            phase = 1
            waits.add(gap)
        else:
            tensor = next((t, k) for t, words in MOVE_WORDS.items() if kind in words)
            direction = "off" if kind.startswith("offload") else "pre"
            if direction in placed.setdefault(tensor, {}):
                return None
            placed[tensor][direction] = 2 * gap + phase
    fixed: Dict[int, float] = {}
    for g in range(b.n_gaps):
        fixed[b.waits[g]] = 1.0 if g in waits else 0.0
    used = set()
    for t, mv in enumerate(b.moves):
        where = placed.get(mv.tensor, {})
        inside = where.get("off") in b.off[t] and where.get("pre") in b.pre[t] and where["pre"] >= where["off"]
        if inside:
            used.add(mv.tensor)
        for p, c in b.off[t].items():
            fixed[c] = 1.0 if inside and p == where["off"] else 0.0
        for p, c in b.pre[t].items():
            fixed[c] = 1.0 if inside and p == where["pre"] else 0.0
        fixed[b.moved[t]] = 1.0 if inside else 0.0
    return fixed if used == set(placed) else None


def solve(b: Built, time_limit_s: float, fixed: Optional[Dict[int, float]] = None,
          start: Optional[List[float]] = None, threads: int = 1):
    """Runs HiGHS on the model, with some columns fixed and from a start: (status,
    column values, the step's time in ms, its lower bound), each None when HiGHS has none."""
    import highspy
    import numpy as np

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("threads", threads)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-6)
    m = b.model
    lb = list(m.lb)
    ub = list(m.ub)
    if fixed:
        for c, v in fixed.items():
            lb[c] = ub[c] = v
    inf = highspy.kHighsInf
    lb = [max(v, -inf) for v in lb]
    ub = [min(v, inf) for v in ub]
    h.addVars(len(lb), np.array(lb), np.array(ub))
    h.changeColsCost(len(lb), np.arange(len(lb), dtype=np.int32), np.array(m.cost))
    h.changeObjectiveOffset(m.offset)
    ints = np.array([i for i, v in enumerate(m.integer) if v], dtype=np.int32)
    h.changeColsIntegrality(len(ints), ints, np.array([highspy.HighsVarType.kInteger] * len(ints)))
    starts, index, value, lo, hi = [], [], [], [], []
    for r_lo, r_hi, terms in m.rows:
        starts.append(len(index))
        for c, v in terms.items():
            index.append(c)
            value.append(v)
        lo.append(max(r_lo, -inf))
        hi.append(min(r_hi, inf))
    h.addRows(len(lo), np.array(lo), np.array(hi), len(index), np.array(starts, dtype=np.int32),
              np.array(index, dtype=np.int32), np.array(value))
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(start)
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = list(h.getSolution().col_value) if has_solution else None
    bound = info.mip_dual_bound if has_solution or status == "Time limit reached" else None
    return status, values, (info.objective_function_value if has_solution else None), bound


@dataclass
class Check:
    plan_ms: float               # the given plan, as the MILP times it with its own copies
    best_ms: Optional[float]     # the best placement found
    bound_ms: Optional[float]    # no placement is faster than this
    status: str
    best_ops: Optional[List[Op]]
    variables: int = 0
    constraints: int = 0
    notes: List[str] = field(default_factory=list)


def time_placement(b: Built, ops: List[Op], time_limit_s: float):
    """The MILP with the copies and waits of `ops` fixed (b built from its compute ops):
    (status, column values, the step's time); values and time are None when `ops` lies
    outside the space or does not fit the budget there."""
    fixed = placement_of(b, ops)
    if fixed is None:
        return "outside the space", None, None
    status, values, objective, _ = solve(b, time_limit_s, fixed=fixed)
    return status, values, objective


def check_plan(chain: Chain, ops: List[Op], budget_bytes: int, time_limit_s: float = 60.0,
               kept_inputs: bool = True) -> Check:
    """Times the plan's own placement in the MILP (the model's self-check), then
    searches every placement from it."""
    b = build(chain, compute_ops_of(ops), budget_bytes, kept_inputs)
    result = Check(plan_ms=float("nan"), best_ms=None, bound_ms=None, status="", best_ops=None,
                   variables=len(b.model.lb), constraints=len(b.model.rows))
    status, start, plan_ms = time_placement(b, ops, time_limit_s)
    if start is None:
        result.notes.append(f"the plan's own placement has no start to give ({status}: two waits in a gap, a "
                            "second move, or over the budget)")
    else:
        result.plan_ms = plan_ms
    result.status, values, result.best_ms, result.bound_ms = solve(b, time_limit_s, start=start)
    if values is not None:
        result.best_ops = decode(b, values)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True, help="profile.json with a link")
    parser.add_argument("--schedule", required=True, help="schedule.json whose compute ops are kept")
    parser.add_argument("--out", help="write the fastest placement found as schedule.json")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per MILP solve (default 60)")
    parser.add_argument("--no-kept-inputs", action="store_true",
                        help="leave offload_input / prefetch_input out of the space (the offload DP's vocabulary)")
    args = parser.parse_args(argv)
    try:
        with open(args.profile) as f:
            profile = json.load(f)
        with open(args.schedule) as f:
            schedule = json.load(f)
        chain = chain_from_profile(profile, args.profile)
    except (OSError, ValueError, KeyError) as e:
        print(f"copy_placement_milp: {e}", file=sys.stderr)
        return 2
    if args.time_limit <= 0:
        print(f"copy_placement_milp: --time-limit {args.time_limit}: must be positive", file=sys.stderr)
        return 2
    try:
        ops = parse_ops(schedule)
        if schedule.get("chain_length") != chain.L:
            raise ValueError(f"chain_length is {schedule.get('chain_length')}, but {args.profile} has {chain.L} stages")
        result = check_plan(chain, ops, int(schedule["budget_bytes"]), args.time_limit, not args.no_kept_inputs)
    except KeyError as e:
        print(f"copy_placement_milp: {args.schedule}: no field {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"copy_placement_milp: {args.schedule}: {e} (is it valid for this profile? `memopt simulate` says)",
              file=sys.stderr)
        return 2

    def ms(v):
        return "none" if v is None else f"{v:.6g} ms"
    print(f"{len(compute_ops_of(ops))} compute ops, {result.variables} variables, {result.constraints} constraints")
    print(f"the plan, timed by the MILP: {ms(result.plan_ms)}")
    print(f"best placement: {ms(result.best_ms)} ({result.status}), lower bound {ms(result.bound_ms)}")
    for note in result.notes:
        print(f"note: {note}")
    if args.out and result.best_ops is not None:
        out = dict(schedule)
        out["ops"] = [[k] if i < 0 else [k, i] for k, i in result.best_ops]
        out.pop("predicted", None)
        out["solver"] = "copy-placement-milp"
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
