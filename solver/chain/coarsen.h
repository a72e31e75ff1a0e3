// coarsen.h: a chain of operator stages seen as the chain of its blocks, and a plan
// for the blocks written out on the operator stages (Note [Plans made for the blocks]).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// Note [Plans made for the blocks]
// At operator granularity a transformer block is a run of stages whose residual
// stream is carried through all of them (Note [Carried bytes] in chain.h). A block
// plan moves a block's whole saved state with one offload_saved; written out on the
// operator stages it becomes a queue of copies, one per stage (each stage's input
// where it owns bytes, each stage's saved state beyond its output), issued back to
// back. The offload DP's items make at most two copies each, so that plan lies outside
// every class it searches, and over a link at tight budgets it can be faster than the
// DP's operator plans. So `optimal` also solves the chain of blocks (Note [Known
// plans from the blocks] in optimal.cpp) and writes its plan out here.
//
// The block chain is built from the operator chain alone, so that the numbers the
// block plan is chosen by are the operator chain's: each block's forward runs its
// stages' forwards, its backward their backwards in reverse, and its bytes are what
// the operator chain holds. A block's saved state is everything its kept stages hold
// beyond its input; its transients are the highest the operator stages reach above
// what the block adds, found by replaying the stages' memory as the simulator counts
// it. A plan without copies and without fwd_drop then has the same peak and time on
// both chains; fwd_drop's block transient is its fwd_ckpt's, which holds the block's
// input longer, so the block chain over-counts it, never under.

// A chain and the groups of consecutive stages its coarse stages stand for.
struct Coarsening {
  Chain chain;             // one stage per group
  std::vector<int> first;  // first[g]: the stage group g starts at; first.back() == the fine chain's length
};

// Note [Block boundaries]
// `optimal` also solves the chain of a chain's blocks (Note [Known plans from the
// blocks] in optimal.cpp), so it must know which stages make up one block. Whoever
// cuts a model into stages knows, and writes it in each stage's `block` field
// (memopt's GPT-2 stages, and through them the profiler and the roofline estimate). A
// profile written before that field existed has none; there the stage names tell, as
// they did: a name up to its first all-digit component is its block (block_of).
// Consecutive stages of one non-empty block are one block.

// The block a stage's name puts it in: the name up to its first all-digit component
// ("h.3.attn.c_attn" -> "h.3", "model.layers.7.mlp" -> "model.layers.7"), or empty
// when it has none before its last component (a stage of its own: "embed", "h.3").
std::string_view block_of(std::string_view stage_name);

// Each stage's block (Note [Block boundaries]): its `block` field where any stage of
// the chain has one, otherwise block_of(its name). Views into `chain`.
std::vector<std::string_view> stage_blocks(const Chain& chain);

// The chain of `fine`'s blocks (consecutive stages of one of stage_blocks), or nullopt when
// no block holds two stages. Only stages in one block are merged.
std::optional<Coarsening> coarsen_to_blocks(const Chain& fine);

// The chain whose stage g runs fine stages first[g] .. first[g+1]-1 (first[0] == 0,
// increasing, ending at the fine length).
Coarsening coarsen(const Chain& fine, std::vector<int> first);

// `coarse_ops`, a plan for coarse.chain, written out on `fine`. A block's
// `offload_input` becomes the moves of its input's own bytes and of the ending carries
// (Note [Carried bytes may leave] in simulate.h) whose first holder is that input; its
// `offload_saved` the moves of every stage's own input bytes, ending carries and saved
// state inside the block. Bytes carried in from before the block stay, as they do on
// the chain of blocks, and a move with nothing to move is left out with its prefetch;
// the caller simulates the plan.
std::vector<Op> write_out(const Chain& fine, const Coarsening& coarse, const std::vector<Op>& coarse_ops);

}  // namespace memopt::solver
