// rotor.cpp: the keep/recompute DP of docs/formats.md, "The recompute DP", fast and plain.
//
// Note [How the fast DP is fast]
// The recurrence is Θ(slots·L³). Five things make it quick without changing a
// single value (the tests compare it with the plain version bit for bit):
//  1. Times are int32 (Note [Time quantisation] in rotor.h): exact, associative
//     sums, half the bytes of double, 8-16 lanes per vector instruction.
//  2. Rows are contiguous in m, so a checkpoint branch is, for all m at once,
//     row_st[m] = min(row_st[m], F + row_jt[m - x_j] + row_sj[m]) -- a shifted
//     vector add and min that the compiler vectorises (with target clones for
//     AVX-512 and AVX2). No choice table is written: the reconstruction
//     re-evaluates the few branches it visits and takes the first that attains
//     the stored value, which is exactly the branch a strict-< scan would keep.
//  3. Only the band of m that can matter is computed: below the first finite m
//     of each operand nothing is feasible, and from the point where keeping every
//     stage fits, the value is the lower bound Σ(uf+ub) and needs no search.
//  4. Columns are filled in groups that share their operands in cache, as a
//     wavefront over the cores (Note [Column wavefront]).
//  5. A checkpoint branch runs only over the part of its band where it can still
//     lower the row (Note [Branches that cannot lower the row]).
#include "solver/dp/rotor.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "solver/chain/plan.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace memopt::solver {

int32_t TimeQuantum::units(double ms) const {
  return static_cast<int32_t>(std::llround(ms / unit_ms));
}

TimeQuantum time_quantum_for(const Chain& chain) {
  // No persistent schedule runs a forward more than L+1 times, so this bounds
  // every value and every partial sum in the tables.
  const int L = chain.length();
  double sum_uf = 0, sum_ub = chain.loss.bwd_ms;
  for (int i = 0; i < L; ++i) {
    sum_uf += std::max(chain.uf(i), chain.uf_nograd(i));
    sum_ub += std::max(chain.ub(i), chain.ub_after_keep(i));
  }
  const double bound_ms = (L + 1) * sum_uf + sum_ub;
  TimeQuantum q;
  if (!(bound_ms > 0)) return q;
  // Largest values must stay below 2^28 units so that F + two table values never
  // overflow int32; a power of two keeps integer-ms inputs exact.
  const int e = static_cast<int>(std::ceil(std::log2(bound_ms / static_cast<double>(1 << 28))));
  q.unit_ms = std::ldexp(1.0, e);
  return q;
}

int64_t bytes_to_slots(int64_t bytes, int64_t budget_bytes, int slots) {
  if (bytes == 0) return 0;
  // Rounded up for a negative transient too (Note [A backward may peak below its
  // gradient] in chain.h): -floor(|bytes| * slots / budget).
  if (bytes < 0) return -static_cast<int64_t>(static_cast<__int128>(-bytes) * slots / budget_bytes);
  const __int128 num = static_cast<__int128>(bytes) * slots;
  return static_cast<int64_t>((num + budget_bytes - 1) / budget_bytes);
}

namespace {

constexpr int32_t kInf = 1 << 30;

// The chain in slots and quantised times, with the conventions of docs/formats.md, "Conventions
// the simulators and DPs use" for stage L.
struct Discrete {
  int L = 0;
  int64_t S = 0;                        // slots
  std::vector<int64_t> x;               // 0..L+1
  std::vector<int64_t> ftmp, ftmp_keep, btmp;  // 0..L
  std::vector<int32_t> uf, ub;          // 0..L; uf is fwd_keep's time
  std::vector<int32_t> uf_nograd;       // fwd_ckpt / fwd_drop's time, 0..L
  std::vector<int32_t> ub_pair;         // bwd s right after fwd_keep s: the base case (Note [A stage run back to back])
  std::vector<int32_t> uf_prefix;       // uf_prefix[k] = Σ_{i<k} uf_nograd_i, 0..L+1
  std::vector<int32_t> keep_prefix;     // keep_prefix[k] = Σ_{i<k} uf_i + ub_i
  bool rotor_compat = false;
  // Note [Carried bytes] in chain.h, in slots. Without carried bytes each equals the
  // plain size it replaces, so the DP is the one of docs/formats.md, "The recompute DP" unchanged.
  std::vector<int64_t> xbar_beside;     // x̄_{s+1} - c_{s+1}: ā_{s+1} next to a_s, s in 0..L
  std::vector<int64_t> x_beside;        // x_{k+1} - c_{k+1}: a_{k+1} next to a_k (d_{k+1} next to d_k), k in 0..L
  std::vector<int64_t> x_after_table;   // x_j - sh(s, j) at [s * (L + 2) + j], only when the chain carries

  // Sizes in slots of budget / o.slots; the table runs on to m = o.slots + extra.
  Discrete(const Chain& c, int64_t budget, const DpOptions& o, int64_t extra = 0)
      : L(c.length()), S(o.slots + extra), rotor_compat(o.rotor_compat) {
    const TimeQuantum q = time_quantum_for(c);
    const auto sl = [&](int64_t b) { return bytes_to_slots(b, budget, o.slots); };
    x.resize(L + 2); ftmp.resize(L + 1); ftmp_keep.resize(L + 1); btmp.resize(L + 1);
    uf.resize(L + 1); ub.resize(L + 1); uf_nograd.resize(L + 1); ub_pair.resize(L + 1);
    uf_prefix.assign(L + 2, 0); keep_prefix.assign(L + 2, 0);
    for (int k = 0; k <= L + 1; ++k) x[k] = sl(c.x(k));
    for (int i = 0; i <= L; ++i) {
      ftmp[i] = sl(c.ftmp(i)); ftmp_keep[i] = sl(c.ftmp_keep(i)); btmp[i] = sl(c.btmp(i));
      uf[i] = q.units(c.uf(i)); ub[i] = q.units(c.ub(i)); uf_nograd[i] = q.units(c.uf_nograd(i));
      // rotor's recurrence has one price per op. The rule of Note [A stage run back to
      // back] holds in units too, whatever the rounding.
      ub_pair[i] = rotor_compat ? ub[i] : std::max(q.units(c.ub_after_keep(i)), ub[i] - uf_nograd[i]);
      if (ub_pair[i] < 0) ub_pair[i] = 0;
      uf_prefix[i + 1] = uf_prefix[i] + uf_nograd[i];
      keep_prefix[i + 1] = keep_prefix[i] + uf[i] + ub[i];
    }
    xbar_beside.resize(L + 1);
    x_beside.resize(L + 1);
    for (int k = 0; k <= L; ++k) {
      xbar_beside[k] = sl(c.xbar(k + 1) - c.carried(k + 1));
      x_beside[k] = sl(c.x(k + 1) - c.carried(k + 1));
    }
    if (c.carries()) {
      x_after_table.assign(static_cast<size_t>(L + 2) * (L + 2), 0);
      for (int s = 0; s <= L; ++s) {
        int64_t run = c.x(s);
        for (int j = s + 1; j <= L + 1; ++j) {
          run = std::min(run, c.carried(j));
          x_after_table[static_cast<size_t>(s) * (L + 2) + j] = sl(c.x(j) - run);
        }
      }
    }
  }

  // a_j checkpointed while a_s is resident, s < j: what the checkpoint branch hands
  // on to (j, t) (Note [Carried bytes]).
  int64_t x_after(int s, int j) const {
    return x_after_table.empty() ? x[j] : x_after_table[static_cast<size_t>(s) * (L + 2) + j];
  }

  // Σ_{k=s}^{j-1} of the no-grad forward: the checkpoint branch's fwd_ckpt and fwd_drops.
  int32_t fwd_sum(int s, int j) const { return uf_prefix[j] - uf_prefix[s]; }
  // Note [The base case runs back to back]
  // Of the ops a subproblem emits, only the base case (s, s), s < L, runs fwd_keep s and
  // bwd s back to back: a keep branch puts its subproblem's ops between them, a
  // subproblem's first op is a forward, and in store-all's order the loss sits between
  // the last stage's two. So the base case takes the pair's time (Note [A stage run back
  // to back] in chain.h) and every other pair uf + ub, as the simulators price the ops.
  // Keeping every stage of (s, t) ends with such a base case when t < L: that sum is
  // still the least any schedule of (s, t) takes, because a checkpoint branch adds each
  // of its stages' no-grad forward and, by the rule of that Note, the back-to-back pair
  // it may gain at j - 1 saves no more than that forward costs.
  int32_t base_pair(int s) const { return uf[s] + ub_pair[s]; }
  // Σ_{k=s}^{t} uf_k + ub_k, with (t, t)'s back-to-back pair when t < L: every stage
  // kept, the least any schedule of (s, t) takes.
  int32_t keep_all(int s, int t) const {
    const int32_t all = keep_prefix[t + 1] - keep_prefix[s];
    return t == L ? all : all - ub[t] + ub_pair[t];
  }

  // Note [Floor per branch]
  // The original floor for (s, t) is the memory the forward ops of the checkpoint branch
  // j = t need: fwd_ckpt s and fwd_drop s+1..t-1 next to d_{t+1}. Branch j runs only
  // fwd_ckpt s and fwd_drop s+1..j-1, so its exact floor stops at j-1; the later terms
  // bind only through its subproblems. With one forward tmp per stage (the base format) the
  // subproblems imply them and both floors give the same values; with a separate
  // fwd_keep tmp (Note [Two forward temporaries]) only the per-branch floor is exact,
  // and the keep branch, which runs no no-grad forward, has no floor at all.
  // forward_floor(s, j) = x_{t+1} excluded: max(x_{s+1} + ftmp_s, max_{s<k<j} x_k + x_{k+1} + ftmp_k),
  // each size less what it shares with a resident neighbour (Note [Carried bytes]).
  int64_t forward_step_need(int s, int k) const {  // fwd_drop k, s < k, with a_s resident
    return x_after(s, k) + x_beside[k] + ftmp[k];
  }
  int64_t forward_floor(int s, int j) const {
    int64_t need = x_beside[s] + ftmp[s];
    for (int k = s + 1; k < j; ++k) need = std::max(need, forward_step_need(s, k));
    return need;
  }
  // `bwd s`: d_s and d_{s+1}, ā_{s+1}, beside a_s.
  int64_t backward_need(int s) const { return x[s] + x_beside[s] + xbar_beside[s] + btmp[s]; }
  // Memory the keep branch needs besides its subproblem (and the base case, t == s).
  int64_t keep_need(int s, int t) const {
    const int64_t fwd_grad = rotor_compat ? x[s + 1] : x[t + 1];
    return std::max(fwd_grad + xbar_beside[s] + ftmp_keep[s], backward_need(s));
  }
  int64_t base_need(int s) const {
    if (s == L) return x[L] + btmp[L];
    return std::max(x[s + 1] + xbar_beside[s] + ftmp_keep[s], backward_need(s));
  }
  int32_t base_value(int s) const { return s == L ? ub[L] : base_pair(s); }
};

// Tables indexed by subchain: one row of S+1 values per (s, t), s <= t <= L.
struct Table {
  int L = 0;
  int64_t S = 0;
  std::unique_ptr<int32_t[]> values;    // default-initialised: rows are written before read
  std::vector<int64_t> first_finite;    // smallest m with a finite value, S+1 if none
  std::vector<int64_t> all_kept_from;   // from here on the value is the lower bound

  Table(int L_, int64_t S_) : L(L_), S(S_) {
    const size_t pairs = static_cast<size_t>(L + 1) * (L + 2) / 2;
    values.reset(new int32_t[pairs * static_cast<size_t>(S + 1)]);
    first_finite.assign(pairs, S + 1);
    all_kept_from.assign(pairs, S + 1);
  }
  // Rows of a fixed s are contiguous, so (s, t) and (s, t') share cache lines of
  // metadata; within a row, m is contiguous.
  size_t pair(int s, int t) const {
    return static_cast<size_t>(s) * (2 * (L + 1) - s + 1) / 2 + static_cast<size_t>(t - s);
  }
  int32_t* row(int s, int t) { return values.get() + pair(s, t) * static_cast<size_t>(S + 1); }
  const int32_t* row(int s, int t) const { return values.get() + pair(s, t) * static_cast<size_t>(S + 1); }
  int32_t at(int s, int t, int64_t m) const { return m < 0 ? kInf : row(s, t)[m]; }
  int64_t finite_from(int s, int t) const { return first_finite[pair(s, t)]; }
};

// row[m] = min(row[m], add + a[m] + b[m]) for m in [0, n): the hot loop.
__attribute__((target_clones("avx512f", "avx2", "default")))
void min_plus(int32_t* __restrict row, const int32_t* __restrict a, const int32_t* __restrict b,
              int32_t add, int64_t n) {
  for (int64_t m = 0; m < n; ++m) row[m] = std::min(row[m], add + a[m] + b[m]);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void plus_into(int32_t* __restrict row, const int32_t* __restrict a, int32_t add, int64_t n) {
  for (int64_t m = 0; m < n; ++m) row[m] = add + a[m];
}

// Note [Branches that cannot lower the row]
// Every row is non-increasing in m (more memory never makes a subchain slower). A
// checkpoint branch j of (s, t) is worth at least its forward plus the least any
// schedule of each of its two parts takes, keep_all(j, t) + keep_all(s, j - 1), at
// every m of its band [lo, kept_from); where the row already holds at most that, the
// branch cannot lower it. Those m are the top of the band, from the first such m on,
// so the branch runs only below it, or a few values past it (lowered_until). On
// long chains most branches recompute a long forward and beat the row only where
// memory is tight, so their band shrinks to its low end. The bound is made of prefix
// sums, not of the parts' own rows: reading one value of a row far away in the table
// cost more than the values it saved. The values are the very ones the whole band
// gives (the min there changes nothing), and the reconstruction reads only values.
//
// Where in [lo, end) a branch worth at least `bound` everywhere stops lowering the row:
// the first of lo, lo + kUntilStride, ... at which row[m] <= bound (end where none).
// The row is already at most `bound` from the first such m on, so the min over the
// values between it and that point changes none of them. A bisection for the first
// such m itself waits for each read before the next, and the bands are a few hundred
// values wide: it cost more than the min over the stride's values that it saved.
constexpr int64_t kUntilStride = 64;
int64_t lowered_until(const int32_t* row, int64_t lo, int64_t end, int64_t bound) {
  int64_t m = lo;
  while (m < end && row[m] > bound) m += kUntilStride;
  return std::min(m, end);
}

void fill_row(const Discrete& d, Table& tab, int s, int t) {
  const int64_t S = d.S;
  int32_t* row = tab.row(s, t);
  const size_t id = tab.pair(s, t);
  if (s == t) {
    const int64_t from = std::min<int64_t>(d.base_need(s), S + 1);
    std::fill(row, row + from, kInf);
    std::fill(row + from, row + S + 1, d.base_value(s));
    tab.first_finite[id] = from;
    tab.all_kept_from[id] = from;
    return;
  }
  // From all_kept_from on, keeping s and everything after it fits and nothing is faster.
  const int64_t kept_from = std::min<int64_t>(
      S + 1, std::max(d.keep_need(s, t), d.xbar_beside[s] + tab.all_kept_from[tab.pair(s + 1, t)]));
  const int32_t lower_bound = d.keep_all(s, t);
  std::fill(row, row + kept_from, kInf);
  std::fill(row + kept_from, row + S + 1, lower_bound);
  tab.all_kept_from[id] = kept_from;
  // Keep branch.
  {
    const int64_t lo = std::max(d.keep_need(s, t), d.xbar_beside[s] + tab.finite_from(s + 1, t));
    if (lo < kept_from) plus_into(row + lo, tab.row(s + 1, t) + (lo - d.xbar_beside[s]), d.uf[s] + d.ub[s], kept_from - lo);
  }
  // Checkpoint branches, j ascending (ties keep the earlier branch, as in the plain DP).
  int64_t fwd_need = d.x_beside[s] + d.ftmp[s];  // forward_floor(s, j), grown with j
  for (int j = s + 1; j <= t; ++j) {
    if (j > s + 1) fwd_need = std::max(fwd_need, d.forward_step_need(s, j - 1));
    const int64_t floor = d.x[t + 1] + fwd_need;
    const int64_t x_j = d.x_after(s, j);
    const int64_t lo = std::max({floor, x_j + tab.finite_from(j, t), tab.finite_from(s, j - 1)});
    if (lo >= kept_from) continue;
    // Operands at m = lo; Note [Branches that cannot lower the row] ends the band.
    const int32_t* after = tab.row(j, t) + (lo - x_j);
    const int32_t* before = tab.row(s, j - 1) + lo;
    const int32_t add = d.fwd_sum(s, j);
    const int64_t until = lowered_until(row, lo, kept_from, int64_t{add} + d.keep_all(j, t) + d.keep_all(s, j - 1));
    if (until > lo) min_plus(row + lo, after, before, add, until - lo);
  }
  int64_t first = 0;
  while (first < kept_from && row[first] >= kInf) ++first;
  tab.first_finite[id] = first;
}

// Note [Column wavefront]
// Row (s, t) reads (j, t) for j > s and (s, j-1) for j <= t. Filling column t (all s,
// descending) right after its own rows keeps the (j, t) operands hot in cache. The
// (s, j-1) operands are row s of every earlier column: filled one column at a time,
// each column streams the whole table filled so far, which no longer fits in cache
// once L is in the hundreds, so the fill becomes bound by memory. So columns are
// filled in groups of kColumnGroup: for each s, descending, the rows (s, t) of every
// column t of the group, t ascending. Row s of the earlier columns is then read by
// the group's columns back to back, while it is hot, and the group's own columns
// stay in cache. Every cell still reads only cells filled before it: (j, t), j > s,
// came with an earlier s; (s, j-1) with an earlier group or an earlier t of this s.
// Groups are dealt round-robin to threads; row s of a group waits until the previous
// group has finished its row s, its only input from another thread.
constexpr int kColumnGroup = 8;

void fill_group_row(const Discrete& d, Table& tab, int s, int t0, int t1) {
  for (int t = std::max(s, t0); t < t1; ++t) fill_row(d, tab, s, t);
}

void fill_table(const Discrete& d, Table& tab, int num_threads) {
  const int L = d.L;
  const int groups = (L + 1 + kColumnGroup - 1) / kColumnGroup;
  const auto first_column = [](int g) { return g * kColumnGroup; };
  const auto end_column = [&](int g) { return std::min(L + 1, (g + 1) * kColumnGroup); };
  int threads = 1;
#ifdef _OPENMP
  // Small tables finish in about a millisecond on one core, less than threads cost
  // to start and, on a loaded machine, to wait for each other; only the explicit
  // num_threads or a big table (about L = 64 at 500 slots) spreads out.
  const double cells = static_cast<double>(L + 1) * (L + 1) * (L + 1) * static_cast<double>(d.S) / 6.0;
  const int wanted = num_threads > 0 ? num_threads : (cells > 2e7 ? omp_get_max_threads() : 1);
  threads = std::clamp(wanted, 1, groups);
#endif
  if (threads == 1) {
    for (int g = 0; g < groups; ++g)
      for (int s = end_column(g) - 1; s >= 0; --s) fill_group_row(d, tab, s, first_column(g), end_column(g));
    return;
  }
  // done_down_to[g] = smallest s whose rows of group g are complete; end_column(g) when none.
  std::unique_ptr<std::atomic<int>[]> done_down_to(new std::atomic<int>[groups]);
  for (int g = 0; g < groups; ++g) done_down_to[g].store(end_column(g), std::memory_order_relaxed);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    int me = 0;
#ifdef _OPENMP
    me = omp_get_thread_num();
#endif
    for (int g = me; g < groups; g += threads) {
      for (int s = end_column(g) - 1; s >= 0; --s) {
        if (g > 0 && s < first_column(g)) {
          for (int spins = 0; done_down_to[g - 1].load(std::memory_order_acquire) > s; ++spins)
            if (spins > 64) std::this_thread::yield();
        }
        fill_group_row(d, tab, s, first_column(g), end_column(g));
        done_down_to[g].store(s, std::memory_order_release);
      }
    }
  }
}

// The branch of (s, t) at m that attains the table's value, keep first then j
// ascending: the same choice the strict-< scan of the plain DP makes.
Decision decide_from_table(const Discrete& d, const Table& tab, int s, int t, int64_t m) {
  const int32_t target = tab.at(s, t, m);
  if (target >= kInf) throw std::logic_error("rotor: reconstruction reached an infeasible subchain");
  if (m >= d.keep_need(s, t) && m - d.xbar_beside[s] >= tab.finite_from(s + 1, t) &&
      d.uf[s] + d.ub[s] + tab.at(s + 1, t, m - d.xbar_beside[s]) == target)
    return {true, -1};
  for (int j = s + 1; j <= t; ++j) {
    const int64_t x_j = d.x_after(s, j);
    if (m < d.x[t + 1] + d.forward_floor(s, j) || m - x_j < tab.finite_from(j, t) || m < tab.finite_from(s, j - 1))
      continue;
    if (d.fwd_sum(s, j) + tab.at(j, t, m - x_j) + tab.at(s, j - 1, m) == target) return {false, j};
  }
  throw std::logic_error("rotor: no branch attains the table value at (" + std::to_string(s) + ", " +
                         std::to_string(t) + ", " + std::to_string(m) + ")");
}

std::optional<int64_t> top_memory(const Discrete& d) {
  const int64_t m = d.S - d.x[0];
  if (m < 0) return std::nullopt;
  return m;
}

}  // namespace

struct RecomputeTable::Impl {
  const Chain& chain;
  Discrete d;
  Table tab;
  Impl(const Chain& c, int64_t budget, const DpOptions& o, int64_t extra)
      : chain(c), d(c, budget, o, extra), tab(d.L, d.S) {
    fill_table(d, tab, o.num_threads);
  }
};

RecomputeTable::RecomputeTable(const Chain& chain, int64_t budget_bytes, const DpOptions& options,
                               int64_t extra_slots) {
  if (budget_bytes <= 0 || options.slots <= 0 || extra_slots < 0)
    throw std::invalid_argument("RecomputeTable: budget and slots must be positive, extra slots not negative");
  impl_ = std::make_unique<Impl>(chain, budget_bytes, options, extra_slots);
  values_ = impl_->tab.values.get();
  length_ = impl_->d.L;
  slots_ = impl_->d.S;
}
RecomputeTable::~RecomputeTable() = default;

int64_t RecomputeTable::slots() const { return impl_->d.S; }
TimeQuantum RecomputeTable::quantum() const { return time_quantum_for(impl_->chain); }
int64_t RecomputeTable::x_slots(int k) const { return impl_->d.x[k]; }
int64_t RecomputeTable::ftmp_slots(int i) const { return impl_->d.ftmp[i]; }
int64_t RecomputeTable::uf_units(int i) const { return impl_->d.uf_nograd[i]; }
int64_t RecomputeTable::ub_after_keep_units(int i) const { return impl_->d.ub_pair[i]; }
int64_t RecomputeTable::finite_from(int s, int t) const { return impl_->tab.finite_from(s, t); }

void RecomputeTable::emit(int s, int t, int64_t m, std::vector<Op>& ops) const {
  const Discrete& d = impl_->d;
  const Table& tab = impl_->tab;
  emit_persistent_range(
      impl_->chain, s, t, [&](int s2, int t2, int64_t m2) { return decide_from_table(d, tab, s2, t2, m2); }, m,
      [&](int s2) { return d.xbar_beside[s2]; }, [&](int s2, int j) { return d.x_after(s2, j); }, ops);
}

std::optional<std::vector<Op>> solve_recompute(const Chain& chain, int64_t budget_bytes, const DpOptions& options) {
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const RecomputeTable table(chain, budget_bytes, options);
  const int64_t m0 = table.slots() - table.x_slots(0);
  if (table.value(0, chain.length(), m0) >= RecomputeTable::kInfinity) return std::nullopt;
  std::vector<Op> ops;
  table.emit(0, chain.length(), m0, ops);
  return ops;
}

std::optional<int64_t> fast_recompute_value(const Chain& chain, int64_t budget_bytes, const DpOptions& options) {
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const RecomputeTable table(chain, budget_bytes, options);
  const int64_t v = table.value(0, chain.length(), table.slots() - table.x_slots(0));
  if (v >= RecomputeTable::kInfinity) return std::nullopt;
  return v;
}

namespace {

// Every cell C[s][t][m] of the plain recurrence, computed one by one.
std::vector<std::vector<std::vector<int64_t>>> reference_cells(const Discrete& d) {
  const int L = d.L;
  const int64_t S = d.S;
  std::vector<std::vector<std::vector<int64_t>>> C(L + 1, std::vector<std::vector<int64_t>>(L + 1));
  const auto at = [&](int s, int t, int64_t m) -> int64_t { return m < 0 ? kInf : C[s][t][m]; };
  for (int diag = 0; diag <= L; ++diag) {
    for (int s = 0; s + diag <= L; ++s) {
      const int t = s + diag;
      auto& row = C[s][t];
      row.assign(S + 1, kInf);
      for (int64_t m = 0; m <= S; ++m) {
        if (s == t) {
          if (m >= d.base_need(s)) row[m] = d.base_value(s);
          continue;
        }
        int64_t best = kInf;
        if (m >= d.keep_need(s, t)) {
          const int64_t sub = at(s + 1, t, m - d.xbar_beside[s]);
          if (sub < kInf) best = d.uf[s] + d.ub[s] + sub;
        }
        for (int j = s + 1; j <= t; ++j) {
          if (m < d.x_after(s, j) || m < d.x[t + 1] + d.forward_floor(s, j)) continue;
          const int64_t a = at(j, t, m - d.x_after(s, j)), b = at(s, j - 1, m);
          if (a >= kInf || b >= kInf) continue;
          best = std::min(best, d.fwd_sum(s, j) + a + b);
        }
        row[m] = best;
      }
    }
  }
  return C;
}

}  // namespace

std::optional<int64_t> reference_recompute_value(const Chain& chain, int64_t budget_bytes, const DpOptions& options) {
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const Discrete d(chain, budget_bytes, options);
  const auto C = reference_cells(d);
  const auto m0 = top_memory(d);
  if (!m0 || C[0][d.L][*m0] >= kInf) return std::nullopt;
  return C[0][d.L][*m0];
}

std::vector<int64_t> reference_recompute_cells(const Chain& chain, int64_t budget_bytes, const DpOptions& options) {
  if (budget_bytes <= 0 || options.slots <= 0) return {};
  const Discrete d(chain, budget_bytes, options);
  const auto C = reference_cells(d);
  std::vector<int64_t> cells;
  for (int s = 0; s <= d.L; ++s)
    for (int t = s; t <= d.L; ++t)
      for (int64_t m = 0; m <= d.S; ++m) cells.push_back(std::min<int64_t>(C[s][t][m], RecomputeTable::kInfinity));
  return cells;
}

}  // namespace memopt::solver
