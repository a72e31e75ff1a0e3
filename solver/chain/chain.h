// chain.h: the chain model of docs/formats.md, "The chain model" -- a model as L stages plus a loss,
// described only by times and byte sizes. Everything the solver knows about a model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memopt::solver {

// What a stage computes, for the baselines that recompute by kind (docs/formats.md
// docs/formats.md, "Baselines"); the simulators and the DPs ignore it. One table: value, JSON word.
enum class StageRole { Other, AttentionCore, Pointwise };
struct StageRoleInfo { StageRole value; const char* word; const char* meaning; };
inline constexpr StageRoleInfo kStageRoles[] = {
    {StageRole::Other, "other", "anything else (the default)"},
    {StageRole::AttentionCore, "attention_core", "an attention's scores, softmax, dropout and product with V"},
    {StageRole::Pointwise, "pointwise", "elementwise only: a layer norm, an activation, a dropout"},
};

const char* role_word(StageRole role);
std::optional<StageRole> role_from_word(std::string_view word);

struct Stage {
  std::string name;
  double fwd_ms = 0;            // uf_i
  double bwd_ms = 0;            // ub_i
  int64_t out_bytes = 0;        // x_{i+1}: the output a_{i+1}, also its gradient d_{i+1}
  int64_t saved_bytes = 0;      // x̄_{i+1}: everything kept for backward, output included
  int64_t fwd_tmp_bytes = 0;    // ftmp_i
  int64_t bwd_tmp_bytes = 0;    // btmp_i; may be negative: Note [A backward may peak below its gradient]
  // Note [A backward may peak below its gradient]
  // `bwd i` peaks at "resident once the new part of d_i is allocated" + btmp_i
  // (docs/formats.md, "Operations and memory without offload: the sequential simulator"). Autograd
  // frees each saved tensor as soon as its node
  // has run, so a backward can let go of part of ā_{i+1} before the last of d_i
  // exists: with memopt's dropout, explicit attention's `attn.mix` lets the dropped
  // probabilities go before it stacks the qkv gradient. Its real peak then sits
  // below that sum, and btmp_i, measured as the difference, is negative. Clamping it
  // at 0 would over-predict every plan whose peak is such a backward. It stays
  // >= -(x_i - c_{i+1}): a backward never peaks below what was resident when it
  // started (validate() checks this), so the simulator's peak at `bwd i` is never
  // below the memory the op starts with.
  // Note [Two forward temporaries] (memopt's extension, docs/formats.md, "Extensions beyond the
  // original contract"): a
  // forward under autograd keeps what it saves, so its transient above ā_{i+1} is
  // far smaller than a no-grad forward's above a_{i+1}, which frees those tensors
  // as it goes. When set, fwd_keep uses this and fwd_ckpt/fwd_drop fwd_tmp_bytes;
  // when absent (files without the field), every forward uses fwd_tmp_bytes.
  std::optional<int64_t> fwd_keep_tmp_bytes;
  // The same split for time: fwd_ms is the forward under autograd (fwd_keep); a
  // no-grad forward (fwd_ckpt, fwd_drop: every recomputation but the last) records
  // no graph and is faster. When absent every forward takes fwd_ms, as it always did.
  std::optional<double> fwd_nograd_ms;
  // fwd_keep and bwd run back to back, the two together (Note [A stage run back to
  // back]). When absent, fwd_ms + bwd_ms, as before.
  std::optional<double> fwd_bwd_pair_ms;
  // Parameters, for `memopt plan` (Note [Parameter homes] in model/staged_model.h):
  // the bytes of the parameters first read by this stage, and, as (home stage, bytes),
  // those it reads that an earlier stage reads first (GPT-2's head and the tied wte).
  // Absent in files from before them and in modeled profiles that do not know them.
  std::optional<int64_t> param_bytes;
  std::vector<std::pair<int, int64_t>> param_reads;
  // c_{i+1} (memopt's extension, Note [Carried bytes]): the first carried_bytes of
  // a_{i+1} are a_i's own first bytes, passed through unchanged, and likewise d_i
  // shares its first carried_bytes with d_{i+1}. 0 (the default, and every file
  // without the field): the output is all new.
  int64_t carried_bytes = 0;
  StageRole role = StageRole::Other;
  // The block the stage is part of, as whoever cut the model into stages wrote it
  // (Note [Block boundaries] in coarsen.h); empty: none, or a profile without the field.
  std::string block;
};

// Note [Carried bytes]
// At operator granularity a transformer block's residual stream runs beside the
// operators: ln_1 maps x to (x, ln_1(x)), the projection maps (x, h) to (x, qkv), and
// only the residual add ends the run. Those outputs hold the very tensor x their
// inputs held, so two boundary activations of one run share bytes: a_j and a_k
// (j < k) share sh(j, k) = min(c_{j+1}, ..., c_k), the first bytes of each (a prefix
// carried through every stage between them, so a shorter carry keeps a prefix of a
// longer one). Whatever is resident, the device holds every a_k (as itself or inside
// ā_k) once, less the longest prefix it shares with another resident a_j -- and since
// sh shrinks with distance, that is the one shared with the nearest resident
// neighbour on either side. Gradients the same: d_k shares sh(j, k) with d_j (the
// residual's gradient passes through those stages unchanged). The simulators count
// memory so, the recompute DP is exact with it (rotor.cpp), and everything the
// profiler measures above a baseline is above that deduplicated baseline. An offload
// or prefetch of an activation that shares bytes with another one on the device is
// refused: moving a_k cannot free what a neighbour still holds, and a prefetched
// copy would not be the neighbour's tensor.

// Note [A stage run back to back]
// fwd_ms and bwd_ms are measured in store-all's steps, where a stage's backward runs
// long after its forward. A plan that recomputes a stage right before its backward
// runs `fwd_keep i` and `bwd i` back to back (no compute op between them: the base
// case of the recompute DP), and the backward then finds what the forward just wrote
// still in the caches. On a CPU with small per-core caches such a pair ran measurably
// faster than fwd_ms + bwd_ms in every run, while a recomputed stage with other
// stages between its forward and its backward did not (Note [Where an op runs] in
// op_context.h). So a stage may carry the pair's own time; the simulators book the
// saving on the bwd (ub_after_keep), so that each op keeps one price known when it
// starts. One rule keeps the DPs' bounds exact: recomputing a stage back to back never
// beats keeping it, uf_nograd_i + pair_i >= uf_i + ub_i; the DP takes the time of
// keeping every stage as the least any schedule can take. Measured times could break
// the rule only by noise, and ub_after_keep rises to meet it where they do.

struct LossStage {
  double bwd_ms = 0;            // ub_L
  int64_t bwd_tmp_bytes = 0;    // btmp_L
};

struct Link {
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  // How long a copy of `bytes` lasts each way: the one formula the simulator, the
  // offload DP and the searches' bounds all use.
  double d2h_ms(int64_t bytes) const { return 1000.0 * static_cast<double>(bytes) / d2h_bytes_per_s; }
  double h2d_ms(int64_t bytes) const { return 1000.0 * static_cast<double>(bytes) / h2d_bytes_per_s; }
};

// Stages 0..L-1 plus the loss, which the DP treats as stage L with no forward.
// The accessors use the symbols of docs/formats.md and its conventions x_{L+1} = x̄_{L+1} = 0,
// uf_L = ftmp_L = 0, so the DP and the simulators read like the recurrences.
struct Chain {
  int64_t input_bytes = 0;      // x_0
  std::vector<Stage> stages;
  LossStage loss;
  std::optional<Link> link;

  int length() const { return static_cast<int>(stages.size()); }  // L

  int64_t x(int k) const {      // size of a_k (and d_k), k in 0..L+1
    if (k == 0) return input_bytes;
    if (k <= length()) return stages[k - 1].out_bytes;
    return 0;
  }
  int64_t xbar(int k) const {   // size of ā_k, k in 1..L+1
    if (k >= 1 && k <= length()) return stages[k - 1].saved_bytes;
    return 0;
  }
  // The bytes of ā_k beyond a_k, k in 1..L: what `offload_saved k` moves (none where
  // it is 0).
  int64_t hollow_bytes(int k) const { return xbar(k) - x(k); }
  double uf(int i) const { return i < length() ? stages[i].fwd_ms : 0.0; }
  // The time of `fwd_ckpt i` / `fwd_drop i` (Note [Two forward temporaries]).
  double uf_nograd(int i) const { return i < length() ? stages[i].fwd_nograd_ms.value_or(stages[i].fwd_ms) : 0.0; }
  double ub(int i) const { return i < length() ? stages[i].bwd_ms : loss.bwd_ms; }
  // `bwd i` right after `fwd_keep i` (Note [A stage run back to back]): the pair less
  // the forward's uf_i, never below ub_i - uf_nograd_i nor 0. ub_L for the loss.
  double ub_after_keep(int i) const {
    if (i >= length() || !stages[i].fwd_bwd_pair_ms) return ub(i);
    return std::max({*stages[i].fwd_bwd_pair_ms - uf(i), ub(i) - uf_nograd(i), 0.0});
  }
  int64_t ftmp(int i) const { return i < length() ? stages[i].fwd_tmp_bytes : 0; }
  // The transient of `fwd_keep i` (Note [Two forward temporaries]).
  int64_t ftmp_keep(int i) const {
    return i < length() ? stages[i].fwd_keep_tmp_bytes.value_or(stages[i].fwd_tmp_bytes) : 0;
  }
  int64_t btmp(int i) const { return i < length() ? stages[i].bwd_tmp_bytes : loss.bwd_tmp_bytes; }
  // c_k: the bytes a_k shares with a_{k-1} (and d_k with d_{k-1}), k in 1..L; 0 elsewhere.
  int64_t carried(int k) const { return k >= 1 && k <= length() ? stages[k - 1].carried_bytes : 0; }
  // sh(j, k) of Note [Carried bytes], any order; x_k when j == k.
  int64_t shared(int j, int k) const;
  bool carries() const;  // any c_k > 0
  // a_k shares no bytes with a_{k-1} nor a_{k+1} (c_k = c_{k+1} = 0): only such an
  // activation can move to the host (Note [Carried bytes]).
  bool stands_alone(int k) const { return carried(k) == 0 && carried(k + 1) == 0; }
  // The bytes of a_k that neither neighbour shares, what `offload_input k` moves (Note
  // [A kept stage's input may leave] in simulate.h): x_k less its longer carried prefix.
  int64_t own_bytes(int k) const { return x(k) - std::max(carried(k), carried(k + 1)); }
  // The bytes a_k took over from a_{k-1} and does not pass on to a_{k+1}, c_k - c_{k+1}
  // when positive: what `offload_carried k` moves (Note [Carried bytes may leave] in
  // simulate.h).
  int64_t ending_carried_bytes(int k) const { return std::max<int64_t>(0, carried(k) - carried(k + 1)); }
  // The first activation holding some of them: the smallest s with sh(s, k) > c_{k+1}
  // (k itself when there are none). a_s .. a_k hold them, no other activation does.
  int first_holder_of_ending_carry(int k) const;
  bool has_role(StageRole role) const;  // any stage of it
  // A link with both bandwidths positive: data can move (validate() requires it of
  // every link in a file; chains built in code may lack one).
  bool has_usable_link() const { return link && link->d2h_bytes_per_s > 0 && link->h2d_bytes_per_s > 0; }
};

// Checks the invariants of docs/formats.md, "The chain model" (non-negative finite numbers, saved
// >= out, at least one
// stage, positive link bandwidths). Returns an empty string when the chain is valid,
// otherwise what is wrong, naming the field with a JSON path such as
// "/stages/3/saved_bytes" so that readers can prefix the file name.
std::string validate(const Chain& chain);

// Drops every stage's back-to-back time (Note [A stage run back to back]): one price per
// op, as in the original chain model.
void drop_pair_times(Chain& chain);

// The least time any schedule can take: every stage forward and backward once.
double sum_fwd_bwd_ms(const Chain& chain);

}  // namespace memopt::solver
