// config.h: GPT-2's dimensions, its presets, how it is cut into stages, which
// attention kernel, which dropout/GELU kernels and which loss it runs, and their JSON form (the
// profile's "model" object). No
// LibTorch here, so the analytic twin and the CLI's flag checks can use it cheaply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace memopt::gpt2 {

// Shape letters used throughout: B batch, T sequence length, C n_embd, H n_head,
// D = C / H head size, V vocabulary size, N = B * T tokens.

enum class Granularity {
  Block,     // embed, one stage per transformer block, head (ln_f + lm_head + loss)
  Sublayer,  // embed, attention and MLP half-blocks as separate stages, head
  Op,        // embed, operator stages per block (Note [Operator stages] in gpt2/stages.h), head
};

enum class Attention {
  Explicit,  // materializes the T x T scores, softmax and dropout, as GPT-2's code does
  Sdpa,      // at::scaled_dot_product_attention (flash kernel on CPU when dropout is 0)
};

// Note [Kernel choice]
// Memopt (opt-in: --kernels memopt) runs kernels/: a dropout that regenerates its mask from a
// Philox (seed, offset) key instead of saving it -- 1 byte per element of every
// dropout, B*H*T*T of them in explicit attention -- and the fused bias + tanh-GELU.
// Aten runs ATen's native_dropout (saves a bool mask) and addmm + gelu. The two draw
// different masks (different generators), so with dropout on they train differently
// but equally well; with dropout off they agree to float rounding. sdpa attention
// keeps its own internal dropout either way. Profiles without a "kernels" field were
// written before the choice existed and mean aten. Aten is the default because on
// this CPU testbed the fused GELU is slower than ATen's vector kernel, and every
// committed timing (results/) was measured with ATen's kernels.
enum class Kernels {
  Memopt,  // kernels/ through model/kernel_ops.h
  Aten,    // ATen's native_dropout and gelu
};

// Note [Loss choice]
// How the head turns the last hidden state into the loss. Aten: ln_f, at::linear with
// the tied wte, log_softmax and nll_loss, as GPT-2's code does -- the N x V logits,
// their log-probabilities and their gradient are all whole tensors, and the tied
// weight gets dense V x C gradients from the head and from the embedding. Chunked:
// model/kernel_ops.h's chunked linear cross-entropy (never more than one block of
// logits), and both of the tied weight's gradients added into its .grad in place
// (Note [Gradients into .grad] there). With GPT-2's vocabulary those N x V and V x C
// tensors are what sets the smallest memory any schedule can reach, so the chunked
// head is what lets recomputation and offloading go below it. Profiles without a
// "loss" field were written before the choice existed and mean aten.
enum class Loss {
  Aten,
  Chunked,
};
// The chunked loss's blocks of logits: rows of the N tokens by columns of the V
// vocabulary entries (at most 2 MiB of floats), what model/ runs and the analytic
// twin counts. Measured on GPT-2 small's head (C = 768, V = 50,257, one thread), the
// block's shape moves the head's time by a few percent; tall, narrow blocks read the
// weight fewest times and keep a block in cache: 1024 x 512 was the fastest of
// 256-1024 rows by 512-8192 columns.
inline constexpr int64_t kChunkedLossRows = 1024;
inline constexpr int64_t kChunkedLossVocabBlock = 512;

// Each enumeration's one table: value, JSON/CLI word, what it means.
struct GranularityInfo { Granularity value; const char* word; const char* meaning; };
inline constexpr GranularityInfo kGranularities[] = {
    {Granularity::Block, "block", "one stage per transformer block"},
    {Granularity::Sublayer, "sublayer", "attention and MLP half-blocks as separate stages"},
    {Granularity::Op, "op", "operator stages (eight per block, nine with explicit attention), the residual stream carried beside them"},
};
struct AttentionInfo { Attention value; const char* word; const char* meaning; };
inline constexpr AttentionInfo kAttentions[] = {
    {Attention::Explicit, "explicit", "materialized T x T scores, softmax, dropout, @V"},
    {Attention::Sdpa, "sdpa", "at::scaled_dot_product_attention"},
};

struct KernelsInfo { Kernels value; const char* word; const char* meaning; };
inline constexpr KernelsInfo kKernelChoices[] = {
    {Kernels::Memopt, "memopt", "mask-free Philox dropout and fused bias + tanh-GELU (kernels/)"},
    {Kernels::Aten, "aten", "ATen's native_dropout (saves a bool mask), addmm and gelu"},
};

struct LossInfo { Loss value; const char* word; const char* meaning; };
inline constexpr LossInfo kLosses[] = {
    {Loss::Aten, "aten", "linear + log_softmax + nll_loss: N x V logits, dense V x C gradients of wte"},
    {Loss::Chunked, "chunked", "chunked linear cross-entropy; wte's gradients added into its .grad in place"},
};

// A table's words for errors: "block or sublayer", "a, b or c".
template <typename Row, size_t K>
std::string words_of(const Row (&table)[K]) {
  std::string out;
  for (size_t i = 0; i < K; ++i) out += (i == 0 ? "" : i + 1 == K ? " or " : ", ") + std::string(table[i].word);
  return out;
}

const char* granularity_word(Granularity g);
std::optional<Granularity> granularity_from_word(const std::string& word);
const char* attention_word(Attention a);
std::optional<Attention> attention_from_word(const std::string& word);
const char* kernels_word(Kernels k);
std::optional<Kernels> kernels_from_word(const std::string& word);
const char* loss_word(Loss l);
std::optional<Loss> loss_from_word(const std::string& word);

struct Gpt2Config {
  int64_t n_layer = 4;
  int64_t n_embd = 128;       // C
  int64_t n_head = 4;         // H
  int64_t vocab_size = 1024;  // V
  int64_t n_positions = 128;  // the longest sequence the position table holds
  // GPT-2 drops out in three places; Hugging Face configs name them apart.
  double embd_pdrop = 0.1;
  double attn_pdrop = 0.1;
  double resid_pdrop = 0.1;
  double layer_norm_epsilon = 1e-5;
  Attention attention = Attention::Explicit;
  Granularity granularity = Granularity::Block;
  Kernels kernels = Kernels::Aten;  // Note [Kernel choice]
  Loss loss = Loss::Aten;           // Note [Loss choice]

  int64_t head_dim() const { return n_embd / n_head; }  // D
  void set_dropout(double p) { embd_pdrop = attn_pdrop = resid_pdrop = p; }
};

// What is trained on: B sequences of T tokens, float32 weights and activations.
struct Gpt2Workload {
  int64_t batch = 4;     // B
  int64_t seq_len = 128; // T
};

struct Gpt2Preset {
  std::string name;
  Gpt2Config config;
  Gpt2Workload workload;
};

// Note [The tiny preset]
// tiny (4 layers, C=128, H=4, V=1024, T=128, B=4) is sized for 2 cores on one thread:
// a block stage does ~0.23 GFLOP forward (a few ms), long enough to time against
// clock noise, and profiling all 6 stages with 5 repeats takes about a second or
// two. Attention still matters: B*H*T*T = 262144 score entries against N*C = 65536
// residual entries, so the explicit and sdpa kernels differ visibly in memory.
// small/medium/large/xl are the published GPT-2 sizes (124M/350M/774M/1558M).
inline constexpr const char* kPresetNames = "tiny, small, medium, large, xl";
std::optional<Gpt2Preset> gpt2_preset(const std::string& name);

// Empty when the configuration can be built and run on `workload`, otherwise what is
// wrong and how to fix it ("n_embd 100 is not divisible by n_head 3; ...").
std::string validate(const Gpt2Config& config);
std::string validate(const Gpt2Config& config, const Gpt2Workload& workload);

// Everything needed to rebuild the profiled model and its batch: the profile's
// "model" object. `seed` seeds the random init (when no hf_dir) and the batch.
struct Gpt2Spec {
  Gpt2Config config;
  Gpt2Workload workload;
  uint64_t seed = 1234;
  std::string hf_dir;  // empty: random GPT-2 init
  std::string preset;  // informational
};

// Keys in the order of docs/formats.md, "How memopt writes its JSON files": the dimensions, then the rest
// alphabetically (Note [Key order in written files] in solver/io/json_printer.h).
nlohmann::ordered_json gpt2_spec_to_json(const Gpt2Spec& spec);
// Throws std::invalid_argument naming the field when the object is not a GPT-2 spec.
Gpt2Spec gpt2_spec_from_json(const nlohmann::json& model);

}  // namespace memopt::gpt2
