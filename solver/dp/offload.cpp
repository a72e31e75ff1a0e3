// offload.cpp: the item DP of Note [The offload schedule class].
#include "solver/dp/offload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <span>
#include <limits>
#include <tuple>

#include "solver/chain/simulate.h"

namespace memopt::solver {
namespace {

constexpr int64_t kUnreached = std::numeric_limits<int64_t>::max();

// What the previous item left for the one starting at e (the state's third part).
// >= 0: C item start whose a_e' is offloaded. "Moved": K e-1 also moved its input's
// own bytes (Note [A kept item that moves its input]).
enum Left : int { kLeftKeptMoved = -5, kLeftHollowMoved = -4, kLeftKept = -3, kLeftHollow = -2, kLeftPlain = -1 };
constexpr int kFirstLeft = kLeftKeptMoved;
// The previous item moved a_{e-1}'s own bytes; it left ā_e hollow.
bool moved_input(int left) { return left == kLeftKeptMoved || left == kLeftHollowMoved; }
bool hollow(int left) { return left == kLeftHollow || left == kLeftHollowMoved; }
// KeepInput / KeepOffloadInput: K e / KO e that also move a_e's own bytes.
enum class Item : uint8_t { Tail, Keep, KeepOffload, Ckpt, KeepRun, CkptRun, KeepInput, KeepOffloadInput };

// Note [Rows for the pairs reached]
// A state is (e, left, D). Its (e, left) pair owns a row of S+1 states, D varying
// fastest: the DP reads the states of one pair in order of D, and an item relaxes
// states whose D follows the same order, so both walk memory in order. A state at e
// has left < e (an offloaded input starts before e), so stage e has e - kFirstLeft
// lefts and the pairs form a triangle. Few of them are ever reached: at operator
// granularity most inputs share carried bytes and cannot be offloaded, and Note
// [States that cannot beat the answer] cuts the C items short, so on GPT-2 XL's 434
// operator stages about 2% of the pairs get a state. A pair gets its row when its
// first state is reached, the rows side by side in that order, so the memory the DP
// writes follows the pairs it reaches, and a pair never reached is skipped whole.
// The storage for every row is reserved but not written (offload_dp_bytes), so pages
// of rows never taken are never mapped.
// Note [Rows whose copy has ended]
// A pair (e, left >= 0) holds the states whose previous item offloaded a_left. Once
// that copy has ended by the time e starts, everything e's items read of the previous
// item (Previous) is its prefetch's slots and units: nothing pending, a plain a_e.
// Two such pairs with equal prefetch slots and units therefore relax the same states
// at the same D, each at its own cost plus the same item costs, and only the cheaper
// state at each D can win a relaxation. So the rows of those pairs are expanded as one
// row, holding at each D the least cost among them and the left whose state has it
// (the first left on a tie, as the plain order meets it first); the way back names
// that left, so the plan prefetches the right input. On a chain of blocks every
// block input has one size, the copies end within a block or two, and most pairs a
// stage reaches are of this kind: a stage then expands a handful of rows instead of
// one per earlier offloaded input. The starts of a pair whose copy still runs that
// wait for it join these rows too (Note [Waited rows merged]). The values are those of the plain expansion, and so
// are the ways back that any plan's walk back reads (Note [Ties broken as the plain
// order would]); OffloadDp.ExpandingOutOfThePlainOrderChangesNoPlan compares the two.
struct StateIndex {
  int L;
  int64_t S;
  static size_t pairs_before(int e) {
    const size_t n = static_cast<size_t>(e);
    return n * (n - 1) / 2 + n * static_cast<size_t>(-kFirstLeft);  // Σ_{e' < e} (e' - kFirstLeft)
  }
  size_t pair(int e, int left) const { return pairs_before(e) + static_cast<size_t>(left - kFirstLeft); }
  size_t pairs() const { return pairs_before(L + 1); }
  size_t row_length() const { return static_cast<size_t>(S + 1); }
  size_t size() const { return pairs() * row_length(); }  // every pair's row
};

// How a state was reached: the item that ended at it, and whether the prefetch of
// the data left by the item before that one was issued ahead ("lead").
// Slots fit 32 bits (DpOptions::slots is an int); 16 bytes in all keep the table
// of ways back, which is read at random, small.
struct Back {
  int32_t from_device = 0;
  int16_t from_e = -1;
  int16_t from_left = 0;
  Item item = Item::Tail;
  bool offload = false;
  bool lead = false;
  bool wait = false;  // the item starts with wait_offloads (Note [Waiting for the previous offload])
  bool then_keep = false;  // a C or CR item [e, n) and K n together (Note [A copy through a recomputed segment])
  bool then_wait = false;  // a KR run that ends waiting for the copy it runs through
  int16_t prefetch_at = -1;  // a KR run with lead: the bwd its prefetch is issued before
};

// The chain in slots and quantum units, plus the few ms figures the copy windows need.
struct Numbers {
  const Chain& chain;
  const RecomputeTable& table;
  TimeQuantum q;
  int64_t budget_bytes;
  int slots;
  std::vector<double> nograd_prefix_ms;  // Σ_{j<k} uf_nograd_j, as the simulator adds them
  std::vector<double> keep_prefix_ms;    // Σ_{j<k} uf_j, likewise
  // Per stage k in 0..L, computed once: the DP's inner loops read them O(L³·S) times.
  std::vector<int64_t> x_slots;          // table.x_slots(k), k in 0..L+1
  std::vector<int64_t> ftmp_slots;       // table.ftmp_slots(k)
  std::vector<int64_t> uf_nograd_units;  // table.uf_units(k)
  std::vector<int64_t> xbar_slots;       // sl(x̄_k), k in 1..L+1 (index 0 unused)
  std::vector<int64_t> ftmp_keep_slots;  // sl(ftmp_keep_k)
  std::vector<int64_t> btmp_slots;       // sl(btmp_k)
  std::vector<int64_t> uf_units;         // units(uf_k)
  std::vector<int64_t> ub_units;         // units(ub_k)
  std::vector<int64_t> ub_pair_units;    // bwd k right after fwd_keep k, as the table prices it
  std::vector<int64_t> own_slots;        // the part of x_slots(k) that offload_input k frees (0: none)

  Numbers(const Chain& c, const RecomputeTable& t, int64_t budget, int s)
      : chain(c), table(t), q(t.quantum()), budget_bytes(budget), slots(s) {
    const int L = c.length();
    nograd_prefix_ms.assign(L + 2, 0.0);
    for (int i = 0; i <= L; ++i) nograd_prefix_ms[i + 1] = nograd_prefix_ms[i] + c.uf_nograd(i);
    keep_prefix_ms.assign(L + 2, 0.0);
    for (int i = 0; i <= L; ++i) keep_prefix_ms[i + 1] = keep_prefix_ms[i] + c.uf(i);
    xbar_slots.assign(L + 2, 0);
    for (int k = 1; k <= L + 1; ++k) xbar_slots[k] = sl(c.xbar(k));
    for (int k = 0; k <= L + 1; ++k) x_slots.push_back(t.x_slots(k));
    for (int k = 0; k <= L; ++k) {
      ftmp_keep_slots.push_back(sl(c.ftmp_keep(k)));
      btmp_slots.push_back(sl(c.btmp(k)));
      uf_units.push_back(units(c.uf(k)));
      ub_units.push_back(units(c.ub(k)));
      ftmp_slots.push_back(t.ftmp_slots(k));
      uf_nograd_units.push_back(t.uf_units(k));
      ub_pair_units.push_back(t.ub_after_keep_units(k));
      // Like Note [Hollow slots]: what stays is rounded up, what leaves the difference.
      own_slots.push_back(k < L && c.own_bytes(k) > 0 ? x_slots[k] - sl(c.x(k) - c.own_bytes(k)) : 0);
    }
  }
  int64_t sl(int64_t bytes) const { return bytes_to_slots(bytes, budget_bytes, slots); }
  int64_t units(double ms) const { return q.units(ms); }
  int64_t ceil_units(double ms) const { return ms > 0 ? static_cast<int64_t>(std::ceil(ms / q.unit_ms)) : 0; }
  double d2h_ms(int64_t bytes) const { return chain.link->d2h_ms(bytes); }
  double h2d_ms(int64_t bytes) const { return chain.link->h2d_ms(bytes); }
  int64_t hollow_bytes(int k) const { return chain.hollow_bytes(k); }
  // Note [Hollow slots]: ā_k is sl(x̄_k) slots; hollowing it leaves exactly sl(x_k)
  // behind, so that D stays a sum of rounded-up sizes (never below the bytes it
  // stands for), and the part that moves is the difference.
  int64_t hollow_slots(int k) const { return sl(chain.xbar(k)) - table.x_slots(k); }
};

// The data the item before e left and that e's items must account for.
struct Previous {
  int64_t prefetch_slots = 0;   // bytes to bring back before that item's backward
  int64_t prefetch_units = 0;   // its h2d time
  int64_t pending_slots = 0;    // its offload, still copying when e starts
  double pending_ms = 0;        // how long that copy still runs (<= 0: done)
  // A kept item that moved its input and its saved state issued two copies, the
  // input's first: these of pending_slots are freed once it ends, first_ms from e's start.
  int64_t first_slots = 0;
  double first_ms = 0;
  bool input_plain = true;      // a_e is a plain activation (may be offloaded)
  bool offloaded = false;       // the previous item offloaded something
  bool has_prefetch() const { return offloaded; }
  bool pending() const { return pending_ms > 0; }
  // The slots still copying at an op that starts `elapsed_ms` after e's start (a
  // copy ending exactly then has freed its bytes first, docs/formats.md, "Offload: the timeline simulator").
  int64_t pending_at(double elapsed_ms) const {
    return (elapsed_ms < first_ms ? first_slots : 0) + (elapsed_ms < pending_ms ? pending_slots - first_slots : 0);
  }
};

Previous previous_of(const Numbers& n, int e, int left) {
  Previous p;
  p.input_plain = left == kLeftPlain || left >= 0;  // not inside a kept ā_e
  p.offloaded = hollow(left) || moved_input(left) || left >= 0;
  if (moved_input(left)) {
    // Both copies start as e's first op does, the input's first (Note [A kept item
    // that moves its input]).
    const int64_t own = n.chain.own_bytes(e - 1);
    const bool saved = hollow(left);
    p.first_slots = n.own_slots[e - 1];
    p.first_ms = n.d2h_ms(own);
    p.pending_slots = p.prefetch_slots = p.first_slots + (saved ? n.hollow_slots(e) : 0);
    p.pending_ms = p.first_ms + (saved ? n.d2h_ms(n.hollow_bytes(e)) : 0);
    p.prefetch_units = n.ceil_units(n.h2d_ms(own) + (saved ? n.h2d_ms(n.hollow_bytes(e)) : 0));
  } else if (left == kLeftHollow) {
    const int64_t bytes = n.hollow_bytes(e);
    p.prefetch_slots = p.pending_slots = n.hollow_slots(e);
    p.prefetch_units = n.ceil_units(n.h2d_ms(bytes));
    p.pending_ms = n.d2h_ms(bytes);  // started as e's first op did
  } else if (left >= 0) {
    const int64_t bytes = n.chain.x(left);
    p.prefetch_slots = p.pending_slots = n.table.x_slots(left);
    p.prefetch_units = n.ceil_units(n.h2d_ms(bytes));
    // Started when fwd_ckpt left ended; fwd_drop left+1..e-1 ran since.
    p.pending_ms = n.d2h_ms(bytes) - (n.nograd_prefix_ms[e] - n.nograd_prefix_ms[left + 1]);
  }
  return p;
}

// Note [Waited rows merged]
// An item that starts by waiting for the previous item's copy (Note [Waiting for the
// previous offload]) reads nothing of that copy any more: of Previous, only the
// prefetch's slots and units, whether a_e is plain and whether the previous item
// offloaded. So a pair whose copy still runs as e starts has two kinds of starts:
// those that do not wait, which depend on its copy and are expanded from its own row,
// and those that wait, which are the starts of a pair whose copy has ended, at the
// pair's cost plus the wait's units. These join the merged row of the pairs whose
// copy has ended (Note [Rows whose copy has ended]) with the same prefetch, plainness
// and offload, each state marked as waiting, so that its way back says so; the
// argument is that Note's: at each D only the cheapest of them can win a relaxation,
// and on a tie the first left, as the plain order meets it first (a pair is in one
// merged row at most once). Where blocks repeat, many pairs of one stage still copy
// as it starts, and most of their waited starts are then expanded once per prefetch
// size instead of once per pair.
// The Previous of `prev`'s starts that wait.
Previous waited(const Previous& prev) {
  Previous after = prev;
  after.pending_slots = 0;
  after.pending_ms = 0;
  after.first_slots = 0;
  after.first_ms = 0;
  return after;
}
// Whether the starts of two pairs whose copy has ended, or that wait for it, read the
// same of the previous item.
bool same_after_the_copy(const Previous& a, const Previous& b) {
  return a.prefetch_slots == b.prefetch_slots && a.prefetch_units == b.prefetch_units &&
         a.input_plain == b.input_plain && a.offloaded == b.offloaded;
}

// Note [Ties broken as the plain order would]
// A state keeps the first of its cheapest relaxations (strict `<`), so in the plain
// order of the DP's loops -- item start e, left, D, wait, lead, then the items in the
// order tail, K, KR, C -- the way back of every state is that of the relaxation
// earliest in that order among those of its least cost. Notes [Rows whose copy has
// ended], [Waited rows merged], [KR runs by row] and [C items by row] expand states
// out of that order, so where two relaxations of a state cost the same, `earlier`
// compares their ways back by that order, and the state keeps the earlier one as the
// plain loops would. From
// one start (e, left, D, wait, lead) no two items of one rank land in the same state:
// the K items each land in a left of their own, a KR run [e, k) lands at k either
// ending there or waiting there, never both (one needs the copy ended by then, the
// other still running), and a C item's length is its landing stage. Where the rows
// are expanded in the plain order the relaxations arrive in key order, and the
// comparison never takes. Merged rows also leave unexpanded some states that the
// plain order expands: a pair's state that another pair of its row beats at the same
// D or at fewer slots. Each relaxation of
// such a state is matched, at no more cost and no more slots, by one of the state that
// beats it, so it can only be the way back of a state that is itself beaten in its
// row, and a walk back visits only expanded states, none of them beaten.
int item_rank(Item item) {
  switch (item) {
    case Item::Tail: return 0;
    case Item::Keep:
    case Item::KeepOffload:
    case Item::KeepInput:
    case Item::KeepOffloadInput: return 1;
    case Item::KeepRun: return 2;
    case Item::Ckpt:
    case Item::CkptRun: return 3;
  }
  return 0;
}
bool earlier(const Back& a, const Back& b) {
  const auto key = [](const Back& x) {
    return std::make_tuple(x.from_e, x.from_left, x.from_device, x.wait, x.lead, item_rank(x.item));
  };
  return key(a) < key(b);
}

}  // namespace

static_assert(sizeof(Back) == 16);
// The way back to an item start from the state (e, left, D), with its wait and lead.
Back back_from(int64_t D, int e, int left, bool lead, bool wait, Item item = Item::Tail) {
  return Back{static_cast<int32_t>(D), static_cast<int16_t>(e), static_cast<int16_t>(left), item, false, lead, wait};
}

// Note [Rows for the pairs reached]: storage for `capacity` states, written row by
// row as the rows are taken; `row_of_pair` is -1 for a pair no state of which has been
// reached in this solve.
struct OffloadDpMemory::Tables {
  struct Free { void operator()(void* p) const { std::free(p); } };
  std::unique_ptr<int64_t, Free> best;  // malloc'ed: nothing is written before a row is taken
  std::unique_ptr<Back, Free> back;     // Back is trivially copyable: malloc'ed storage holds it
  size_t capacity = 0;
  std::vector<int32_t> row_of_pair;
  // Note [Rows whose copy has ended]: the merged rows of one item start, side by side,
  // each a cost, the left that holds it and whether its start waits, per D.
  struct MergedRows {
    size_t length = 0;  // states per row
    int count = 0;
    std::vector<int64_t> costs;
    std::vector<int16_t> lefts;
    std::vector<char> waits;
    void clear(size_t row_length) {
      length = row_length;
      count = 0;
    }
    // A new merged row, empty; returns its number.
    int start() {
      const size_t at = static_cast<size_t>(count++) * length;
      costs.resize(at + length);
      lefts.resize(at + length);
      waits.resize(at + length);
      std::fill_n(costs.data() + at, length, kUnreached);
      return count - 1;
    }
    // The least cost at each D of merged row `which` and `row`, the states of `left`
    // whose start waits `wait_units` for the previous item's copy (Note [Waited rows
    // merged]), and the first left that has it. Lefts are added in increasing order.
    void add(int which, const int64_t* row, int left, bool wait, int64_t wait_units) {
      const size_t at = static_cast<size_t>(which) * length;
      int64_t* into = costs.data() + at;
      int16_t* from = lefts.data() + at;
      char* waited = waits.data() + at;
      for (size_t D = 0; D < length; ++D)
        if (row[D] < kUnreached && row[D] + wait_units < into[D]) {
          into[D] = row[D] + wait_units;
          from[D] = static_cast<int16_t>(left);
          waited[D] = wait;
        }
    }
    const int64_t* costs_of(int which) const { return costs.data() + static_cast<size_t>(which) * length; }
    const int16_t* lefts_of(int which) const { return lefts.data() + static_cast<size_t>(which) * length; }
    const char* waits_of(int which) const { return waits.data() + static_cast<size_t>(which) * length; }
  } merged;

  void reserve(size_t states) {
    if (states <= capacity) return;
    best.reset(static_cast<int64_t*>(std::malloc(states * sizeof(int64_t))));
    back.reset(static_cast<Back*>(std::malloc(states * sizeof(Back))));
    if (!best || !back) throw std::bad_alloc();
    capacity = states;
  }
};
OffloadDpMemory::OffloadDpMemory() : tables_(std::make_unique<Tables>()) {}
OffloadDpMemory::~OffloadDpMemory() = default;
void OffloadDpMemory::reserve(int length, int64_t slots) { tables_->reserve(StateIndex{length, slots}.size()); }

int64_t offload_dp_bytes(int length, int64_t slots) {
  const StateIndex index{length, slots};
  return static_cast<int64_t>(index.size() * (sizeof(int64_t) + sizeof(Back)));
}

namespace {

// The DP's tables and its answer while it runs forward (Note [The offload schedule
// class]): best[state] is the least cost of reaching a state, back[state] the item
// that did; a tail that completes the schedule updates the answer.
struct Forward {
  const Chain& chain;
  const Numbers& n;
  const StateIndex index;
  int64_t S;
  int32_t* row_of_pair;  // Note [Rows for the pairs reached]
  int32_t rows = 0;      // rows taken so far
  bool through_recomputation, through_kept_runs, waiting_kept_runs, moving_kept_inputs;
  int64_t* best;  // the tables' data: plain pointers, so that the relaxations inline tight
  Back* back;
  int64_t answer = kUnreached;  // or one more than a bound (Note [An answer known in advance])
  Back answer_back;
  bool found = false;  // answer_back holds a plan
  // Note [States that cannot beat the answer]
  // Every item's cost is at least uf + ub units for each stage it covers, or uf and
  // the bwd's back-to-back price where that is less: a kept stage runs fwd_keep and bwd
  // once, and every persistent schedule of a segment runs each of its stages' fwd_keep
  // and bwd, some of them back to back (Note [A stage run back to back] in chain.h;
  // RecomputeTable's values are never below that sum). So rest_units[e], that sum over
  // stages e .. L-1, is the least any plan spends
  // after a state at e, and a state whose cost plus it exceeds the answer found so
  // far cannot lead to a plan as fast as the answer. Nor can any state it would
  // reach, so it is not expanded, and a C item whose forward alone already costs that
  // much is not extended further (its bound only grows with its length). This changes
  // no value and no plan: the answer never rises, every state on a path as fast as
  // the final answer is still reached with the same cost and, because the states and
  // items that reach it first are not skipped, the same way back; and a state skipped
  // costs more than any state it would have dominated that could still matter. The
  // tests compare both ways (OffloadDp.SkippingBeatenStatesChangesNoPlan).
  std::vector<int64_t> rest_units;
  bool skips;
  // relax_kept_runs_row's per state: the hidden units and the prefetch's bwd of a run
  // that no longer holds the prefetch.
  std::vector<int64_t> run_hidden;
  std::vector<int16_t> run_prefetch_at;

  Forward(const Chain& c, const Numbers& numbers, const StateIndex& i, OffloadShapes shapes, bool skip,
          OffloadDpMemory::Tables& tables)
      : chain(c),
        n(numbers),
        index(i),
        S(i.S),
        row_of_pair(tables.row_of_pair.data()),
        through_recomputation(shapes >= OffloadShapes::ThroughRecomputation),
        through_kept_runs(shapes >= OffloadShapes::ThroughKeptRuns),
        waiting_kept_runs(shapes >= OffloadShapes::WaitingKeptRuns),
        moving_kept_inputs(shapes >= OffloadShapes::MovingKeptInputs),
        best(tables.best.get()),
        back(tables.back.get()),
        rest_units(c.length() + 1, 0),
        skips(skip) {
    for (int k = c.length() - 1; k >= 0; --k)
      rest_units[k] = rest_units[k + 1] + n.uf_units[k] + std::min(n.ub_units[k], n.ub_pair_units[k]);
  }

  // Where the row of pair (e, left) starts, taking it, all unreached, on first use.
  size_t row_start(int e, int left) {
    int32_t& row = row_of_pair[index.pair(e, left)];
    const size_t length = index.row_length();
    if (row < 0) {
      row = rows++;
      std::fill_n(best + static_cast<size_t>(row) * length, length, kUnreached);
    }
    return static_cast<size_t>(row) * length;
  }
  void relax(int to_e, int64_t to_D, int to_left, int64_t cost, const Back& b) {
    relax_in(row_start(to_e, to_left), to_D, cost, b);
  }
  // The same, in the row that starts at `row` (row_start's).
  void relax_in(size_t row, int64_t to_D, int64_t cost, const Back& b) {
    relax_lazily(row, to_D, cost, [&] { return b; });
  }
  // relax_in, the way back made only where the cost ties or wins: most landings lose,
  // and making one costs more than the compare.
  template <typename WayBack>
  [[gnu::always_inline]] void relax_lazily(size_t row, int64_t to_D, int64_t cost, const WayBack& way_back) {
    const size_t to = row + static_cast<size_t>(to_D);
    if (cost > best[to]) return;
    const Back b = way_back();
    // Note [Ties broken as the plain order would]
    if (cost < best[to] || earlier(b, back[to])) {
      best[to] = cost;
      back[to] = b;
    }
  }
};

// An item starting at state (e, D, left), after waiting for the previous item's copy
// or not, with that item's prefetch issued ahead ("lead") or not.
struct ItemStart {
  int e;
  int64_t D;
  Previous prev;  // a copy: read in every inner loop, it stays in registers and cache
  bool wait, lead;
  bool pending;    // the previous item's copy still runs as this item starts
  int64_t start;   // cost so far, the wait included
  int64_t m;       // slots for a persistent schedule inside the item
  int64_t pend;    // the slots of that copy (0 when none is pending)
  Back here;       // the way back to this start; each item fills in its kind

  // What is left of that copy once the item's ops e .. k-1 have run, their times
  // summed in `prefix_ms` (<= 0: it has ended).
  double copy_left_ms(const std::vector<double>& prefix_ms, int k) const {
    return pending ? prev.pending_ms - (prefix_ms[k] - prefix_ms[e]) : 0.0;
  }
  // The slots of that copy an op k of the item still holds.
  int64_t pending_at(const std::vector<double>& prefix_ms, int k) const {
    return pending ? prev.pending_at(prefix_ms[k] - prefix_ms[e]) : 0;
  }
  // The previous item's backward waits for its prefetch: issued ahead, it overlaps
  // this item's backward of `inner` units.
  int64_t stall(int64_t inner) const {
    if (!prev.has_prefetch()) return 0;
    return lead ? std::max<int64_t>(0, prev.prefetch_units - inner) : prev.prefetch_units;
  }
};

// Tail: a persistent schedule of e..L. A copy still running is allowed only into the
// lone loss, whose one op then holds it too.
[[gnu::always_inline]] inline void relax_tail(Forward& f, const ItemStart& it) {
  const Chain& chain = f.chain;
  const int L = chain.length();
  const RecomputeTable& table = f.n.table;
  const Previous& prev = it.prev;
  if (it.pending && it.e != L) return;
  int64_t inner, exposed = it.stall(0);
  if (it.pending) {
    inner = chain.ub(L) >= prev.pending_ms ? table.value(L, L, it.m - prev.pending_slots) : RecomputeTable::kInfinity;
    // A prefetch issued with the loss starts when its offload ends.
    if (inner < RecomputeTable::kInfinity)
      exposed = it.lead ? std::max<int64_t>(0, f.n.ceil_units(prev.pending_ms) + prev.prefetch_units - inner)
                        : prev.prefetch_units;
  } else {
    inner = table.value(it.e, L, it.m);
    exposed = it.stall(inner);
  }
  if (inner >= RecomputeTable::kInfinity) return;
  const int64_t cost = it.start + inner + exposed;
  // Note [Ties broken as the plain order would]
  if (cost < f.answer || (cost == f.answer && f.found && earlier(it.here, f.answer_back))) {
    f.answer = cost;
    f.answer_back = it.here;
    f.found = true;
  }
}

// K e and KO e (and KI, KOI: Note [A kept item that moves its input]): fwd_keep e
// (holding a copy still running), bwd e later.
[[gnu::always_inline]] inline void relax_keep(Forward& f, const ItemStart& it) {
  const Chain& chain = f.chain;
  const Numbers& n = f.n;
  const int e = it.e;
  const int64_t keep_fwd = n.xbar_slots[e + 1] + n.ftmp_keep_slots[e];
  const int64_t keep_bwd = n.xbar_slots[e + 1] + n.x_slots[e + 1] + n.x_slots[e] + n.btmp_slots[e];
  if (!((!it.pending || chain.uf(e) >= it.prev.pending_ms) && it.D + it.pend + keep_fwd <= f.S && keep_bwd <= it.m))
    return;
  const int64_t cost = it.start + n.uf_units[e] + n.ub_units[e] + it.stall(n.ub_units[e]);
  const int64_t D = it.D, xbar_next = n.xbar_slots[e + 1], x_next = n.x_slots[e + 1];
  Back b = it.here;
  b.item = Item::Keep;
  f.relax(e + 1, D + xbar_next, kLeftKept, cost, b);
  const bool hollows = chain.hollow_bytes(e + 1) > 0;
  if (hollows) {
    b.item = Item::KeepOffload;
    f.relax(e + 1, D + x_next, kLeftHollow, cost, b);
  }
  if (f.moving_kept_inputs && chain.own_bytes(e) > 0) {
    b.item = Item::KeepInput;
    f.relax(e + 1, D + xbar_next - n.own_slots[e], kLeftKeptMoved, cost, b);
    if (hollows) {
      b.item = Item::KeepOffloadInput;
      f.relax(e + 1, D + x_next - n.own_slots[e], kLeftHollowMoved, cost, b);
    }
  }
}

// KR [e, f), f >= e + 2: K e .. K f-1. With lead, the previous item's prefetch is
// issued before bwd j, the highest of the run such that it and every bwd below it fit
// holding the prefetch's bytes; it hides behind them. A copy still running may run on
// through the run's fwd_keep ops, each of which holds its bytes while it starts before
// the copy ends; the run ends once the copy has, or by waiting for it, which a lone K e
// may do too (Note [A copy through a kept run]). A run longer than it must be, for its
// copy and its prefetch, is the same plan as a shorter one and K items after it, so
// the loop stops there.
[[gnu::always_inline]] inline void relax_kept_runs(Forward& f, const ItemStart& it) {
  const Numbers& n = f.n;
  const int e = it.e, L = f.chain.length();
  const int64_t S = f.S;
  const int64_t keep_fwd = n.xbar_slots[e + 1] + n.ftmp_keep_slots[e];
  const int64_t keep_bwd = n.xbar_slots[e + 1] + n.x_slots[e + 1] + n.x_slots[e] + n.btmp_slots[e];
  if (!((it.lead || it.pending) && it.D + it.pend + keep_fwd <= S && keep_bwd <= it.m)) return;
  const auto copying_at = [&](int k) { return it.copy_left_ms(n.keep_prefix_ms, k) > 0; };
  int64_t d = it.D + n.xbar_slots[e + 1], units = n.uf_units[e] + n.ub_units[e], hidden = it.lead ? n.ub_units[e] : 0;
  bool holding = it.lead;  // bwd e .. k-1 all hold the prefetch
  int prefetch_at = e;
  const auto run_back = [&](bool then_wait) {
    Back b = it.here;
    b.item = Item::KeepRun;
    b.then_wait = then_wait;
    b.prefetch_at = static_cast<int16_t>(prefetch_at);
    return b;
  };
  for (int k = e + 1; k <= L; ++k) {
    if (!f.through_kept_runs && copying_at(k)) break;
    // The run [e, k) may end waiting for the copy, and k start without it.
    if (f.waiting_kept_runs && copying_at(k))
      f.relax(k, d, kLeftKept, it.start + units + n.ceil_units(it.copy_left_ms(n.keep_prefix_ms, k)) + it.stall(hidden),
              run_back(true));
    if (k == L) break;
    const int64_t xbar_k = n.xbar_slots[k + 1];
    if (d + xbar_k + n.ftmp_keep_slots[k] + it.pending_at(n.keep_prefix_ms, k) > S) break;
    const int64_t bwd_k = d + xbar_k + n.x_slots[k + 1] + n.x_slots[k] + n.btmp_slots[k];
    if (bwd_k > S) break;
    holding = holding && bwd_k + it.prev.prefetch_slots <= S;
    if (holding) {
      hidden += n.ub_units[k];
      prefetch_at = k;
    }
    d += xbar_k;
    units += n.uf_units[k] + n.ub_units[k];
    if (copying_at(k + 1)) continue;  // the copy outlasts fwd_keep k
    f.relax(k + 1, d, kLeftKept, it.start + units + it.stall(hidden), run_back(false));
    if (!holding) break;
  }
}

// C [e, next): fwd_ckpt e, [offload e], fwd_drop e+1..next-1. A copy still running may
// run through the item's forward ops (Note [A copy through a recomputed segment]), each
// of which then holds its bytes. CR [e, next) (Note [A recomputed run]) lands in the
// same states; only the cheaper of the two is relaxed.
[[gnu::always_inline]] inline void relax_checkpointed(Forward& f, const ItemStart& it) {
  const Chain& chain = f.chain;
  const Numbers& n = f.n;
  const Previous& prev = it.prev;
  const int e = it.e, L = chain.length();
  const int64_t S = f.S, D = it.D, x_e = n.x_slots[e];
  if (!f.through_recomputation && it.pending && chain.uf_nograd(e) < prev.pending_ms) return;
  if (D + it.pend + n.x_slots[e + 1] + n.ftmp_slots[e] > S) return;
  const auto still_copying_at = [&](int k) { return it.copy_left_ms(n.nograd_prefix_ms, k) > 0; };
  // a_{e+1}, which may share bytes with a_e, exists once fwd_ckpt e has run; its copy
  // would queue behind one still running after fwd_ckpt e.
  const bool may_offload = prev.input_plain && chain.x(e) > 0 && chain.stands_alone(e) && !still_copying_at(e + 1);
  const double own_ms = may_offload ? n.d2h_ms(chain.x(e)) : 0;
  bool fits_kept = true, fits_offloaded = may_offload;
  int64_t fwd_units = n.uf_nograd_units[e];
  // CR's backward re-runs stages e..next-1 with fwd_keep, then issues the previous
  // item's prefetch. Running maxima over the run of the device slots its re-forward and
  // its bwd ops need.
  bool may_run = it.lead && f.through_recomputation;
  int64_t run_d = D, run_refwd = 0, run_bwd = 0, run_units = 0, run_hidden = 0;
  for (int next = e + 1; next <= L; ++next) {
    if (next > e + 1) {
      // fwd_drop k starts Σ_{e+1}^{k-1} uf_nograd after the copy of a_e began; a copy
      // ending exactly then has freed its bytes first (docs/formats.md, "Offload: the
      // timeline simulator").
      const int k = next - 1;
      fwd_units += n.uf_nograd_units[k];
      const int64_t work = n.x_slots[k] + n.x_slots[k + 1] + n.ftmp_slots[k] + it.pending_at(n.nograd_prefix_ms, k);
      fits_kept = fits_kept && D + work <= S;
      const bool gone = own_ms <= n.nograd_prefix_ms[k] - n.nograd_prefix_ms[e + 1];
      fits_offloaded = fits_offloaded && D - (gone ? x_e : 0) + work <= S;
    }
    if (!fits_kept && !fits_offloaded) break;
    // Note [States that cannot beat the answer]: a landing at `next` or beyond costs at
    // least this plus what the stages from there on must take.
    if (f.skips && it.start + fwd_units + f.rest_units[e] > f.answer) break;
    const bool copied = !still_copying_at(next);  // by the end of the item's forward
    // Where the item ends: at `next` once the copy is done; while it still runs, only
    // with K next right after, whose fwd_keep holds the copy's bytes and lasts until it
    // ends (Note [A copy through a recomputed segment]).
    bool lands = copied;
    if (!copied && fits_kept && next < L) {
      const int64_t d = D + n.x_slots[next], xbar_k = n.xbar_slots[next + 1];
      lands = chain.uf(next) >= it.copy_left_ms(n.nograd_prefix_ms, next) &&
              d + it.pending_at(n.nograd_prefix_ms, next) + xbar_k + n.ftmp_keep_slots[next] <= S &&
              d + xbar_k + n.x_slots[next + 1] + n.x_slots[next] + n.btmp_slots[next] <= S;
    }
    // C and CR land in the same states: only the cheaper is relaxed (CR on a tie).
    int64_t run_cost = kUnreached;
    if (may_run) {
      const int k = next - 1;
      const int64_t xbar_k = n.xbar_slots[k + 1];
      run_refwd = std::max(run_refwd, run_d + xbar_k + n.ftmp_keep_slots[k]);
      run_bwd = std::max(run_bwd, run_d + xbar_k + n.x_slots[k + 1] + n.x_slots[k] + n.btmp_slots[k]);
      run_d += xbar_k;
      run_units += n.uf_units[k] + n.ub_units[k];
      run_hidden += n.ub_units[k];
      // Both maxima only grow with the run: once one is over, every longer run is.
      may_run = run_refwd <= S && run_bwd + prev.prefetch_slots <= S;
      // d_next is on the device through the re-forward; the prefetch's bytes through
      // every bwd of the run. Its last stage runs back to back (Note [A stage run back
      // to back] in chain.h).
      const int64_t pair_saving = n.ub_units[k] - n.ub_pair_units[k];
      if (may_run && run_refwd + n.x_slots[next] <= S)
        run_cost = it.start + fwd_units + run_units - pair_saving + it.stall(run_hidden - pair_saving);
    }
    if (!lands) continue;
    const int64_t inner = n.table.value(e, next - 1, it.m);
    const int64_t ckpt_cost =
        inner < RecomputeTable::kInfinity ? it.start + fwd_units + inner + it.stall(inner) : kUnreached;
    if (run_cost == kUnreached && ckpt_cost == kUnreached) continue;
    Back b = it.here;
    b.item = run_cost <= ckpt_cost ? Item::CkptRun : Item::Ckpt;
    const int64_t cost = std::min(run_cost, ckpt_cost);
    if (!copied) {
      b.then_keep = true;
      f.relax(next + 1, D + n.x_slots[next] + n.xbar_slots[next + 1], kLeftKept, cost + n.uf_units[next] + n.ub_units[next],
              b);
      continue;
    }
    if (fits_kept) f.relax(next, D + n.x_slots[next], kLeftPlain, cost, b);
    if (fits_offloaded) {
      b.offload = true;
      f.relax(next, D - x_e + n.x_slots[next], e, cost, b);
    }
  }
}

// One state of a row that its item start expands: its slots, its cost so far and
// the left whose state it is (Note [Rows whose copy has ended]).
struct Expanded {
  int64_t D;
  int64_t so_far;
  int left;
  bool wait;  // its start waits for the previous item's copy (Note [Waited rows merged])
};

// Note [C items by row]
// The C items of one state land in a row per item length, one value each, and read a
// recompute table row per length, one value each: state by state, every landing and
// every read is somewhere else in memory. Every check of a C item [e, next) is a
// bound on D -- D plus sizes that depend only on e, next and the item start's wait and
// lead, at most S -- and every such bound only falls as next grows, so for one item
// start (a row, wait and lead) the C items are taken length by length, and for each
// length every state of the row still alive in turn, in order of D. The landings of
// one length then walk one row upwards and the reads one table row downwards. The
// states of a row are on its staircase (cost falling as D grows), so the states
// still alive at a length are one run of them: those whose D is within the bounds
// (the first ones), less those whose cost can no longer beat the answer (Note
// [States that cannot beat the answer]; the last ones). Each relaxation is the one the
// plain order makes for that state, item and length; only the order differs (Note
// [Ties broken as the plain order would]). relax_checkpointed is the same item for
// one state, in the plain order (DpOptions::plain_expansion), and
// OffloadDp.ExpandingOutOfThePlainOrderChangesNoPlan compares the two.
//
// Note [C items of one stage by length]
// Every item start of stage e reads, for its C items [e, next), the same recompute
// table row, (e, next - 1), and lands in the same rows: next's plain row, next's row
// that offloads a_e, and next + 1's kept row. Taken one item start after another, each
// start walks every length, and the rows of a length have left the cache by the time
// the next start reads them. So the stage's item starts are taken length by length
// once every row of the stage has been expanded otherwise, each start doing its C items
// of that length (relax_checkpointed_length; what a start keeps from one length to the
// next is in CheckpointedItems). Only the order of the relaxations changes (Note [Ties
// broken as the plain order would]); the answer that skips states (Note [States that
// cannot beat the answer]) may then be found earlier, which changes no plan either.
//
// Note [Landings a cheaper one of the same length dominates]
// For one item start and length, the states land in one row each (plain, offloaded,
// or with K next), at D plus a size that depends only on the item: in order of D, so
// each landing holds more slots than the ones before it in that row. A landing that
// costs no less than one of those is dominated in its row, and a state so dominated
// is never expanded: the expansion takes only a row's staircase, cost falling as D
// grows, and a merged row's value at D is the least of its rows' values, each plus its
// start's own wait, so a dominated value is dominated there too. The answer and the ways
// back read only states that are expanded. So such a landing is skipped: cells off the
// staircase may then keep a dearer value, and no state the DP expands, no value it
// reads and no plan changes (OffloadDp.ExpandingOutOfThePlainOrderChangesNoPlan
// compares the plans and answers with the plain order's, which skips nothing).

// One item start's C items, taken length by length (Notes [C items by row] and [C
// items of one stage by length]): what
// stays from one length to the next, and the states still alive, [first, count) of
// its row's, which lie in a buffer of every row's states of the stage (`at`).
struct CheckpointedItems {
  ItemStart start;
  size_t at = 0, first = 0, count = 0;
  int64_t wait_units = 0, lead_slots = 0;
  int64_t kept_max = 0, offloaded_max = -1, fwd_units = 0;
  bool may_offload = false, runs = false;
  double own_ms = 0;
  // CR's bounds: its re-forward's and its bwd ops' running maxima, less D.
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min() / 4;
  int64_t run_reach = 0, run_refwd = kNone, run_bwd = kNone, run_units = 0, run_hidden = 0;
};

// The C items of `start`, its row's states being the `count` from `at` in the stage's
// buffer of states; none where its start can have none.
std::optional<CheckpointedItems> checkpointed_items(const Forward& f, const ItemStart& start, size_t at, size_t count) {
  const Chain& chain = f.chain;
  const Numbers& n = f.n;
  const Previous& prev = start.prev;
  const int e = start.e;
  const int64_t S = f.S;
  if (!f.through_recomputation && start.pending && chain.uf_nograd(e) < prev.pending_ms) return std::nullopt;
  CheckpointedItems c;
  c.start = start;
  c.at = at;
  c.count = count;
  c.wait_units = start.wait ? n.ceil_units(prev.pending_ms) : 0;
  c.lead_slots = start.lead ? prev.prefetch_slots : 0;
  // A start needs m = S - D - lead_slots >= 0, and the item's first op its room.
  c.kept_max = std::min(S - c.lead_slots, S - start.pend - n.x_slots[e + 1] - n.ftmp_slots[e]);
  c.may_offload = prev.input_plain && chain.x(e) > 0 && chain.stands_alone(e) &&
                  !(start.copy_left_ms(n.nograd_prefix_ms, e + 1) > 0);
  c.own_ms = c.may_offload ? n.d2h_ms(chain.x(e)) : 0;
  c.offloaded_max = c.may_offload ? c.kept_max : -1;
  c.fwd_units = n.uf_nograd_units[e];
  c.runs = start.lead && f.through_recomputation;
  return c;
}

// The C items [e, next) of `c`, the stage's buffer of states at `all`; false once no
// longer item of it can land.
bool relax_checkpointed_length(Forward& f, CheckpointedItems& c, const Expanded* all, int next) {
  const Chain& chain = f.chain;
  const Numbers& n = f.n;
  const ItemStart& start = c.start;
  const Previous& prev = start.prev;
  const int e = start.e, L = chain.length();
  const int64_t S = f.S, x_e = n.x_slots[e];
  const Expanded* states = all + c.at;
  if (next > e + 1) {
    const int k = next - 1;
    c.fwd_units += n.uf_nograd_units[k];
    const int64_t work = n.x_slots[k] + n.x_slots[k + 1] + n.ftmp_slots[k] + start.pending_at(n.nograd_prefix_ms, k);
    c.kept_max = std::min(c.kept_max, S - work);
    const bool gone = c.own_ms <= n.nograd_prefix_ms[k] - n.nograd_prefix_ms[e + 1];
    if (c.may_offload) c.offloaded_max = std::min(c.offloaded_max, S - work + (gone ? x_e : 0));
  }
  const int64_t kept_max = c.kept_max, offloaded_max = c.offloaded_max, fwd_units = c.fwd_units;
  const int64_t wait_units = c.wait_units, lead_slots = c.lead_slots;
  // A state over both bounds is over them for every longer item.
  const int64_t alive_max = std::max(kept_max, offloaded_max);
  size_t first = c.first, count = c.count;
  while (count > first && states[count - 1].D > alive_max) --count;
  // Costs fall along the row, so those that cannot beat the answer come first.
  const int64_t most = f.answer - wait_units - fwd_units - f.rest_units[e];
  while (first < count && f.skips && states[first].so_far > most) ++first;
  c.first = first;
  c.count = count;
  if (first == count) return false;
  const double copy_left_ms = start.copy_left_ms(n.nograd_prefix_ms, next);
  const bool copied = !(copy_left_ms > 0);
  // Where the copy is still running, the item lands only with K next (Note [A copy
  // through a recomputed segment]).
  int64_t lands_max = -1;
  if (!copied && next < L && chain.uf(next) >= copy_left_ms) {
    const int64_t x_next = n.x_slots[next], xbar_k = n.xbar_slots[next + 1];
    lands_max = std::min({kept_max, S - x_next - start.pending_at(n.nograd_prefix_ms, next) - xbar_k - n.ftmp_keep_slots[next],
                          S - x_next - xbar_k - n.x_slots[next + 1] - x_next - n.btmp_slots[next]});
  }
  int64_t run_max = -1, run_over_fwd = 0;  // CR: D at most run_max, cost so far + run_over_fwd
  if (c.runs) {
    const int k = next - 1;
    const int64_t xbar_k = n.xbar_slots[k + 1];
    c.run_refwd = std::max(c.run_refwd, c.run_reach + xbar_k + n.ftmp_keep_slots[k]);
    c.run_bwd = std::max(c.run_bwd, c.run_reach + xbar_k + n.x_slots[k + 1] + n.x_slots[k] + n.btmp_slots[k]);
    c.run_reach += xbar_k;
    c.run_units += n.uf_units[k] + n.ub_units[k];
    c.run_hidden += n.ub_units[k];
    const int64_t pair_saving = n.ub_units[k] - n.ub_pair_units[k];
    run_max = std::min({S - c.run_refwd, S - c.run_bwd - prev.prefetch_slots, S - c.run_refwd - n.x_slots[next]});
    run_over_fwd = fwd_units + c.run_units - pair_saving + start.stall(c.run_hidden - pair_saving);
  }
  const int32_t* segment = n.table.row(e, next - 1) + (S - lead_slots);  // segment[-D]: m = S - D - lead_slots
  const int64_t x_next = n.x_slots[next];
  // inner + stall(inner) without its branches: with lead, inner + max(0, units - inner)
  // is max(inner, units); else inner + units (units 0 where there is no prefetch).
  const int64_t prefetch_units = prev.has_prefetch() ? prev.prefetch_units : 0;
  const bool lead = start.lead;
  size_t plain_row = SIZE_MAX, offloaded_row = SIZE_MAX, kept_row = SIZE_MAX;  // taken on their first landing
  // The least cost landed so far in each of the three rows (Note [Landings a cheaper
  // one of the same length dominates]).
  int64_t least_kept = kUnreached, least_plain = kUnreached, least_offloaded = kUnreached;
  // Every state of the length in turn, the loop made once for each of whether the copy
  // has ended and whether a CR item may land, so that neither is tested per state.
  const auto land_all = [&]<bool kCopied, bool kRuns>() {
    for (size_t i = first; i < count; ++i) {
      const Expanded& st = states[i];
      const int64_t D = st.D;
      if (!kCopied && D > lands_max) continue;
      const int64_t so_far = st.so_far + wait_units;
      const int64_t run_cost = kRuns && D <= run_max ? so_far + run_over_fwd : kUnreached;
      const int64_t inner = segment[-D];
      const int64_t ckpt_cost =
          inner < RecomputeTable::kInfinity
              ? so_far + fwd_units + (lead ? std::max(inner, prefetch_units) : inner + prefetch_units)
              : kUnreached;
      if (kRuns && run_cost == kUnreached && ckpt_cost == kUnreached) continue;
      if (!kRuns && ckpt_cost == kUnreached) continue;
      const int64_t cost = kRuns ? std::min(run_cost, ckpt_cost) : ckpt_cost;
      const auto way_back = [&] {
        return back_from(D, e, st.left, start.lead, start.wait || st.wait,
                         run_cost <= ckpt_cost ? Item::CkptRun : Item::Ckpt);
      };
      if (!kCopied) {
        if (cost >= least_kept) continue;
        least_kept = cost;
        if (kept_row == SIZE_MAX) kept_row = f.row_start(next + 1, kLeftKept);
        f.relax_lazily(kept_row, D + x_next + n.xbar_slots[next + 1], cost + n.uf_units[next] + n.ub_units[next], [&] {
          Back b = way_back();
          b.then_keep = true;
          return b;
        });
        continue;
      }
      if (D <= kept_max && cost < least_plain) {
        least_plain = cost;
        if (plain_row == SIZE_MAX) plain_row = f.row_start(next, kLeftPlain);
        f.relax_lazily(plain_row, D + x_next, cost, way_back);
      }
      if (D <= offloaded_max && cost < least_offloaded) {
        least_offloaded = cost;
        if (offloaded_row == SIZE_MAX) offloaded_row = f.row_start(next, e);
        f.relax_lazily(offloaded_row, D - x_e + x_next, cost, [&] {
          Back b = way_back();
          b.offload = true;
          return b;
        });
      }
    }
  };
  if (copied) {
    if (run_max >= 0) land_all.template operator()<true, true>();
    else land_all.template operator()<true, false>();
  } else {
    if (run_max >= 0) land_all.template operator()<false, true>();
    else land_all.template operator()<false, false>();
  }
  return true;
}

// Note [KR runs by row]
// Like the C items (Note [C items by row]), the KR runs of one state land in a row per
// run length, and every check of a run [e, k) is a bound on D that only falls as k
// grows: D plus the run's sizes (depending only on e, k and the item start) within S.
// The prefetch a run with lead hides behind its bwd ops is held while D is within
// another such bound, falling with k too, and once a run no longer holds it, the run
// lands once more, at the first stage its copy has ended by, and stops. So for one
// item start the runs are taken length by length, and for each length every state of
// the row still alive, in order of D: the states alive are one run of them (the
// first ones are those that cannot beat the answer, Note [States that cannot beat the
// answer]; the last ones are over the bounds), those still holding the prefetch are
// the first of those, and a state that stops holding keeps its hidden units and its
// prefetch's place. Each relaxation is the one relax_kept_runs makes for that state
// and length; only the order differs (Note [Ties broken as the plain order would]),
// and OffloadDp.ExpandingOutOfThePlainOrderChangesNoPlan compares the two.
void relax_kept_runs_row(Forward& f, const ItemStart& start, const Expanded* states, size_t count) {
  const Numbers& n = f.n;
  const Previous& prev = start.prev;
  const int e = start.e, L = f.chain.length();
  const int64_t S = f.S;
  if (!(start.lead || start.pending)) return;
  const int64_t wait_units = start.wait ? n.ceil_units(prev.pending_ms) : 0;
  const int64_t lead_slots = start.lead ? prev.prefetch_slots : 0;
  const int64_t keep_fwd = n.xbar_slots[e + 1] + n.ftmp_keep_slots[e];
  const int64_t keep_bwd = n.xbar_slots[e + 1] + n.x_slots[e + 1] + n.x_slots[e] + n.btmp_slots[e];
  int64_t alive_max = std::min(S - start.pend - keep_fwd, S - lead_slots - keep_bwd);
  size_t first = 0, last = count;
  while (first < last && f.skips && states[first].so_far + f.rest_units[e] > f.answer) ++first;
  while (last > first && states[last - 1].D > alive_max) --last;
  if (first == last) return;
  const auto copying_at = [&](int k) { return start.copy_left_ms(n.keep_prefix_ms, k) > 0; };
  // The run's reach past D, its units, and, for the states still holding the
  // prefetch (those before `holding_end`), the hidden units and the prefetch's bwd.
  int64_t reach = n.xbar_slots[e + 1], units = n.uf_units[e] + n.ub_units[e];
  int64_t hidden = start.lead ? n.ub_units[e] : 0;
  int prefetch_at = e;
  size_t holding_end = start.lead ? last : first;
  f.run_hidden.resize(count);
  f.run_prefetch_at.resize(count);
  for (size_t i = holding_end; i < last; ++i) {
    f.run_hidden[i] = 0;
    f.run_prefetch_at[i] = static_cast<int16_t>(e);
  }
  const auto land = [&](size_t row, int64_t extra_units, bool then_wait) {
    for (size_t i = first; i < last; ++i) {
      const Expanded& st = states[i];
      const bool holds = i < holding_end;
      f.relax_lazily(row, st.D + reach, st.so_far + wait_units + extra_units + start.stall(holds ? hidden : f.run_hidden[i]),
                     [&] {
                       Back b = back_from(st.D, e, st.left, start.lead, start.wait || st.wait,
                                          Item::KeepRun);
                       b.then_wait = then_wait;
                       b.prefetch_at = holds ? static_cast<int16_t>(prefetch_at) : f.run_prefetch_at[i];
                       return b;
                     });
    }
  };
  for (int k = e + 1; k <= L; ++k) {
    if (!f.through_kept_runs && copying_at(k)) break;
    // The runs [e, k) may end waiting for the copy, and k start without it.
    if (f.waiting_kept_runs && copying_at(k))
      land(f.row_start(k, kLeftKept), units + n.ceil_units(start.copy_left_ms(n.keep_prefix_ms, k)), true);
    if (k == L) break;
    const int64_t xbar_k = n.xbar_slots[k + 1];
    const int64_t bwd_k = reach + xbar_k + n.x_slots[k + 1] + n.x_slots[k] + n.btmp_slots[k];
    alive_max = std::min({alive_max, S - reach - xbar_k - n.ftmp_keep_slots[k] - start.pending_at(n.keep_prefix_ms, k),
                          S - bwd_k});
    while (last > first && states[last - 1].D > alive_max) --last;
    holding_end = std::min(holding_end, last);
    if (first == last) break;
    // States whose bwd k cannot hold the prefetch keep what they hid so far.
    while (holding_end > first && states[holding_end - 1].D + bwd_k + prev.prefetch_slots > S) {
      --holding_end;
      f.run_hidden[holding_end] = hidden;
      f.run_prefetch_at[holding_end] = static_cast<int16_t>(prefetch_at);
    }
    hidden += n.ub_units[k];
    prefetch_at = k;
    reach += xbar_k;
    units += n.uf_units[k] + n.ub_units[k];
    if (copying_at(k + 1)) continue;  // the copy outlasts fwd_keep k
    land(f.row_start(k + 1, kLeftKept), units, false);
    last = holding_end;  // a run that no longer holds the prefetch stops here
    if (first == last) break;
  }
}

}  // namespace

bool answer_bounds(int64_t budget_bytes, int slots, int64_t to_budget_bytes, int to_slots) {
  // No coarser slots there: to_budget / to_slots >= budget / slots.
  return budget_bytes > 0 && slots > 0 && to_budget_bytes >= budget_bytes && to_slots >= slots &&
         static_cast<__int128>(to_budget_bytes) * slots >= static_cast<__int128>(budget_bytes) * to_slots;
}

std::optional<std::vector<Op>> solve_offload(const Chain& chain, int64_t budget_bytes, const DpOptions& options,
                                             OffloadDpMemory* memory, const RecomputeTable* given_table,
                                             OffloadAnswer* known) {
  if (known) {
    known->units.reset();
    known->solved_again = false;
    known->rows_merged = 0;
    known->waits_merged = 0;
  }
  if (!chain.has_usable_link())
    return solve_recompute(chain, budget_bytes, options);
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const int L = chain.length();
  std::optional<RecomputeTable> own_table;
  const RecomputeTable& table = given_table ? *given_table : own_table.emplace(chain, budget_bytes, options);
  const Numbers n(chain, table, budget_bytes, options.slots);
  const int64_t S = options.slots;  // a given table may hold more
  const StateIndex index{L, S};
  std::optional<OffloadDpMemory> own;  // Note [The DP's memory kept between solves]
  OffloadDpMemory::Tables& tables = (memory ? *memory : own.emplace()).tables();
  tables.reserve(index.size());
  tables.row_of_pair.assign(index.pairs(), -1);
  const int64_t x0 = n.x_slots[0];
  if (x0 > S) return std::nullopt;
  Forward f(chain, n, index, options.offload_shapes, options.skip_beaten_states, tables);
  // Note [An answer known in advance]: as if a plan of that cost had been found, so that
  // a plan of exactly that cost is still taken.
  const bool bounded = known && known->at_most_units && options.skip_beaten_states;
  if (bounded) f.answer = std::min(kUnreached, *known->at_most_units + 1);
  f.best[f.row_start(0, kLeftPlain) + static_cast<size_t>(x0)] = 0;

  // The rows of one item start, in the order of their (first) left: a reached pair's
  // own, or a merged one (Note [Rows whose copy has ended]).
  struct Row {
    int left;                  // the pair's, or the first merged into it
    Previous prev;
    size_t own = 0;            // a pair's own row: where it starts in f.best
    int merged = -1;           // else: which of the merged rows
  };
  std::vector<Row> rows;
  std::vector<Expanded> all_states;  // every row's of the stage, each row's in order of D
  std::vector<CheckpointedItems> checkpointed;  // the stage's item starts' C items
  int64_t rows_merged = 0, waits_merged = 0;
  const size_t length = index.row_length();
  OffloadDpMemory::Tables::MergedRows& merged = tables.merged;
  for (int e = 0; e <= L; ++e) {
    rows.clear();
    all_states.clear();
    checkpointed.clear();
    merged.clear(length);
    for (int left = kFirstLeft; left < e; ++left) {
      // An input moved by the item before e needs a stage before e.
      if (e == 0 && moved_input(left)) continue;
      const int32_t row = f.row_of_pair[index.pair(e, left)];
      if (row < 0) continue;  // no state of the pair reached
      // Items relax only states of later stages, so no row is taken while this one is read.
      const size_t own = static_cast<size_t>(row) * length;
      const Previous prev = previous_of(n, e, left);
      const bool copy_ended = left >= 0 && !prev.pending();
      if (options.plain_expansion || !(copy_ended || prev.pending())) {
        rows.push_back({left, prev, own});
        continue;
      }
      // A pair whose copy still runs keeps its own row for its starts that do not wait.
      if (prev.pending()) rows.push_back({left, prev, own});
      // Note [Waited rows merged]: what the starts that wait read of the previous item.
      const Previous after = copy_ended ? prev : waited(prev);
      const auto same = std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
        return r.merged >= 0 && same_after_the_copy(r.prev, after);
      });
      int into;
      if (same == rows.end()) {
        into = merged.start();
        rows.push_back({left, after, 0, into});
      } else {
        into = same->merged;
        ++rows_merged;
        if (!copy_ended) ++waits_merged;
      }
      merged.add(into, f.best + own, left, !copy_ended, copy_ended ? 0 : n.ceil_units(prev.pending_ms));
    }
    for (const Row& r : rows) {
      const Previous& prev = r.prev;
      const int64_t* costs = r.merged >= 0 ? merged.costs_of(r.merged) : f.best + r.own;
      const int16_t* lefts = r.merged >= 0 ? merged.lefts_of(r.merged) : nullptr;
      const char* waits = r.merged >= 0 ? merged.waits_of(r.merged) : nullptr;
      // Every check is D + (...) <= S and C(m, ...) only falls as m grows, so a state
      // holding more slots at no lower cost than one holding fewer is dominated: the
      // row's states to expand are its staircase, cost falling as D grows.
      const size_t at = all_states.size();
      int64_t cheapest_below = kUnreached;
      for (int64_t D = 0; D <= S; ++D) {
        const int64_t so_far = costs[D];
        if (so_far >= cheapest_below) continue;
        cheapest_below = so_far;
        if (f.skips && so_far + f.rest_units[e] > f.answer) continue;  // Note [States that cannot beat the answer]
        all_states.push_back({D, so_far, lefts ? lefts[D] : r.left, waits ? waits[D] != 0 : false});
      }
      const std::span<const Expanded> states(all_states.data() + at, all_states.size() - at);
      // The item start of a state, after waiting for the previous item's copy or not
      // (Note [Waiting for the previous offload]: then nothing of it is pending any
      // more), with that item's prefetch issued ahead or not.
      const auto item_start = [&](const Expanded& st, bool wait, bool lead) -> std::optional<ItemStart> {
        // A pending pair's starts that wait are its merged row's, except in the plain expansion.
        if ((wait && (!prev.pending() || !options.plain_expansion)) || (lead && !prev.has_prefetch())) return std::nullopt;
        const bool pending = prev.pending() && !wait;
        const int64_t m = S - st.D - (lead ? prev.prefetch_slots : 0);
        if (m < 0) return std::nullopt;
        return ItemStart{e,
                         st.D,
                         prev,
                         wait,
                         lead,
                         pending,
                         st.so_far + (wait ? n.ceil_units(prev.pending_ms) : 0),
                         m,
                         pending ? prev.pending_slots : 0,
                         back_from(st.D, e, st.left, lead, wait || st.wait)};
      };
      // `one_state`: every item of this state, in the plain order; else those that are
      // not taken by row.
      const auto relax_from = [&](const ItemStart& it, bool one_state) {
        relax_tail(f, it);
        if (e == L) return;
        relax_keep(f, it);
        if (!one_state) return;
        relax_kept_runs(f, it);
        relax_checkpointed(f, it);
      };
      if (options.plain_expansion) {
        // The items of each state in this order, as the ways back record them on a tie.
        for (const Expanded& st : states) {
          if (f.skips && st.so_far + f.rest_units[e] > f.answer) continue;  // beaten since
          for (const bool wait : {false, true})
            for (const bool lead : {false, true})
              if (const auto it = item_start(st, wait, lead)) relax_from(*it, /*one_state=*/true);
        }
        continue;
      }
      for (const bool wait : {false, true})
        for (const bool lead : {false, true}) {
          std::optional<ItemStart> row_start;  // any state's: the C items read only what is not D's
          for (const Expanded& st : states) {
            if (f.skips && st.so_far + f.rest_units[e] > f.answer) continue;
            if (const auto it = item_start(st, wait, lead)) {
              relax_from(*it, /*one_state=*/false);
              if (!row_start) row_start = it;
            }
          }
          if (row_start && e < L) {
            relax_kept_runs_row(f, *row_start, states.data(), states.size());  // Note [KR runs by row]
            // Note [C items by row]: taken below, with every other row's of the stage.
            if (auto items = checkpointed_items(f, *row_start, at, states.size())) checkpointed.push_back(*items);
          }
        }
    }
    // Note [C items of one stage by length]
    for (int next = e + 1; next <= L && !checkpointed.empty(); ++next) {
      size_t still = 0;
      for (CheckpointedItems& c : checkpointed)
        if (relax_checkpointed_length(f, c, all_states.data(), next)) checkpointed[still++] = c;
      checkpointed.resize(still);
    }
  }
  if (known) {
    known->rows_merged = rows_merged;
    known->waits_merged = waits_merged;
  }
  if (!f.found) {
    if (!bounded) return std::nullopt;
    OffloadAnswer unbounded;  // the bound was wrong: Note [An answer known in advance]
    std::optional<std::vector<Op>> plan = solve_offload(chain, budget_bytes, options, memory, &table, &unbounded);
    known->units = unbounded.units;
    known->solved_again = true;
    known->rows_merged += unbounded.rows_merged;
    known->waits_merged += unbounded.waits_merged;
    return plan;
  }
  if (known) known->units = f.answer;
  const Back answer_back = f.answer_back;

  // Walk back to the items: each Back names the state its item started from.
  std::vector<Back> items{answer_back};
  while (items.back().from_e != 0) {
    const Back& b = items.back();
    const int32_t row = f.row_of_pair[index.pair(b.from_e, b.from_left)];
    items.push_back(f.back[static_cast<size_t>(row) * index.row_length() + static_cast<size_t>(b.from_device)]);
  }
  std::reverse(items.begin(), items.end());
  // Where item i's own stages end: a C or CR item taken with the K after it ends
  // one stage before the next item starts.
  const auto end_of = [&](size_t i) {
    return (i + 1 < items.size() ? items[i + 1].from_e : L + 1) - (items[i].then_keep ? 1 : 0);
  };

  std::vector<Op> ops;
  for (size_t i = 0; i + 1 < items.size(); ++i) {
    const Back& it = items[i];
    const int e = it.from_e;
    if (it.wait) ops.push_back({OpKind::WaitOffloads, -1});
    if (it.item == Item::Ckpt || it.item == Item::CkptRun) {
      ops.push_back({OpKind::FwdCkpt, e});
      if (it.offload) ops.push_back({OpKind::Offload, e});
      for (int k = e + 1; k < end_of(i); ++k) ops.push_back({OpKind::FwdDrop, k});
      if (it.then_keep) ops.push_back({OpKind::FwdKeep, end_of(i)});
    } else if (it.item == Item::KeepRun) {
      for (int k = e; k < end_of(i); ++k) ops.push_back({OpKind::FwdKeep, k});
      if (it.then_wait) ops.push_back({OpKind::WaitOffloads, -1});
    } else {
      ops.push_back({OpKind::FwdKeep, e});
      if (it.item == Item::KeepInput || it.item == Item::KeepOffloadInput) ops.push_back({OpKind::OffloadInput, e});
      if (it.item == Item::KeepOffload || it.item == Item::KeepOffloadInput) ops.push_back({OpKind::OffloadSaved, e + 1});
    }
  }
  for (size_t i = items.size(); i-- > 0;) {
    const Back& it = items[i];
    const int e = it.from_e;
    const Previous prev = previous_of(n, e, it.from_left);
    // The previous item's data coming back: both its copies where it moved two.
    std::vector<Op> prefetch;
    if (hollow(it.from_left)) prefetch.push_back({OpKind::PrefetchSaved, e});
    if (moved_input(it.from_left)) prefetch.push_back({OpKind::PrefetchInput, e - 1});
    if (it.from_left >= 0) prefetch.push_back({OpKind::Prefetch, it.from_left});
    const auto push_prefetch = [&] { ops.insert(ops.end(), prefetch.begin(), prefetch.end()); };
    if (it.item == Item::Tail && it.wait) ops.push_back({OpKind::WaitOffloads, -1});  // the tail's forward starts here
    if (it.then_keep) ops.push_back({OpKind::Bwd, end_of(i)});
    const bool prefetch_inside = it.item == Item::CkptRun || it.item == Item::KeepRun;
    if (prev.has_prefetch() && it.lead && !prefetch_inside) push_prefetch();
    const int64_t m = S - it.from_device - (it.lead ? prev.prefetch_slots : 0);
    switch (it.item) {
      case Item::Tail: table.emit(e, L, prev.pending() && !it.wait ? m - prev.pending_slots : m, ops); break;
      case Item::Keep:
      case Item::KeepOffload:
      case Item::KeepInput:
      case Item::KeepOffloadInput: ops.push_back({OpKind::Bwd, e}); break;
      case Item::KeepRun:
        for (int k = end_of(i); k-- > e;) {
          if (it.lead && k == it.prefetch_at) push_prefetch();
          ops.push_back({OpKind::Bwd, k});
        }
        break;
      case Item::Ckpt: table.emit(e, end_of(i) - 1, m, ops); break;
      case Item::CkptRun:
        for (int k = e; k < end_of(i); ++k) ops.push_back({OpKind::FwdKeep, k});
        push_prefetch();
        for (int k = end_of(i); k-- > e;) ops.push_back({OpKind::Bwd, k});
        break;
    }
    if (prev.has_prefetch() && !it.lead) push_prefetch();
  }
  return ops;
}

bool has_waiting_kept_run(const std::vector<Op>& ops) {
  for (size_t i = 1; i < ops.size(); ++i)
    if (ops[i].kind == OpKind::WaitOffloads && ops[i - 1].kind == OpKind::FwdKeep) return true;
  return false;
}

bool has_kept_input_move(const std::vector<Op>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.kind == OpKind::OffloadInput; });
}

std::vector<Op> offload_all_ops(const Chain& chain) {
  const int L = chain.length();
  std::vector<Op> ops;
  // An input sharing bytes with a neighbour cannot leave (Note [Carried bytes]): it
  // stays on the device as a plain checkpoint.
  for (int i = 0; i + 1 < L; ++i) {
    ops.push_back({OpKind::FwdCkpt, i});
    if (chain.stands_alone(i)) ops.push_back({OpKind::Offload, i});
  }
  for (int i = L - 1; i >= 0; --i) {
    if (i > 0 && chain.stands_alone(i - 1)) ops.push_back({OpKind::Prefetch, i - 1});
    ops.push_back({OpKind::FwdKeep, i});
    if (i == L - 1) ops.push_back({OpKind::Loss, -1});
    ops.push_back({OpKind::Bwd, i});
  }
  return ops;
}

std::optional<std::vector<Op>> offload_all(const Chain& chain, int64_t budget_bytes, const DpOptions&) {
  std::vector<Op> ops = offload_all_ops(chain);
  if (!fits(simulate_timeline(chain, ops), budget_bytes)) return std::nullopt;
  return ops;
}

}  // namespace memopt::solver
