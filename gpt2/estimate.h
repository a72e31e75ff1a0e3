// estimate.h: a MODELED GPT-2 profile for a GPU this machine does not have -- byte
// sizes from the analytic twin (gpt2/analytic.h) rescaled to the training dtype,
// times from a per-op roofline against the GPU's published peaks (gpt2/gpu_specs.h).
// `memopt estimate` writes it; the result says "measured": false everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/config.h"
#include "gpt2/gpu_specs.h"
#include "solver/io/profile_json.h"

namespace memopt::gpt2 {

enum class Dtype { Fp32, Fp16, Bf16 };
struct DtypeInfo { Dtype value; const char* word; const char* json_name; int64_t bytes; };
inline constexpr DtypeInfo kDtypes[] = {
    {Dtype::Fp32, "fp32", "float32", 4},
    {Dtype::Fp16, "fp16", "float16", 2},
    {Dtype::Bf16, "bf16", "bfloat16", 2},
};
const DtypeInfo& info(Dtype dtype);
std::optional<Dtype> dtype_from_word(const std::string& word);

// Note [Activation dtype]
// In fp16/bf16 the model runs in that dtype (parameters cast, fp32 master weights in
// the optimizer: Megatron-LM's and DeepSpeed's fp16/bf16 modes), so every float
// activation the analytic twin counts at 4 bytes is stored at 2, except:
//   - dropout masks: bool, 1 byte in every dtype (Korthikanti et al. 2022 count them so);
//   - LayerNorm's mean and rstd: PyTorch keeps them in the accumulate type, fp32;
//   - the flash kernel's logsumexp (sdpa): fp32;
//   - the head's log-probabilities (N x V) and the loss: the cross-entropy is computed
//     in fp32 for stability (Megatron's, and autocast's log_softmax);
//   - the token ids a_0: int64.
// So scaled = fixed + (fp32 bytes - fixed) * dtype_bytes / 4 per field, with `fixed`
// the bytes above. Transients scale as a whole except the head's fp32 log-probabilities
// (forward) and the fp32 gradients of the log-probabilities and logits (backward: the
// head's peak when N >= C, an over-estimate otherwise). Masks and statistics a
// backward frees before its peak scale with the rest, which over-estimates too. The
// twin's transients are those of the CPU kernels (dropout's float copy of its mask,
// the CPU flash kernels' per-thread tiles), which a GPU's fused kernels do not
// allocate, so they are upper bounds there.
// Note [GPU attention]: with --attention sdpa the GPU's flash kernel regenerates the
// dropout mask from its Philox seed instead of saving it, so the bytes are the twin's
// flash path (attention dropout 0) whatever the dropout; explicit attention
// materialises and saves the T x T probabilities, their mask and the dropped copy.

struct StageBytes {
  std::string name;
  int64_t out_bytes = 0;
  int64_t saved_bytes = 0;
  int64_t fwd_tmp_grad_bytes = 0;    // above input + saved, under autograd (fwd_keep)
  int64_t fwd_tmp_nograd_bytes = 0;  // above input + output, without grad (fwd_ckpt/drop)
  int64_t bwd_tmp_bytes = 0;         // the backward's, above input + saved + seed, less d_i
  int64_t carried_bytes = 0;         // the residual passed through (Note [Operator stages])
};

// gpt2_analytic_stages rescaled per Note [Activation dtype]; for fp32 and explicit
// attention every byte field equals the twin's exactly.
std::vector<StageBytes> gpt2_stage_bytes(const gpt2::Gpt2Config& config, const gpt2::Gpt2Workload& workload,
                                         Dtype dtype);

// One kernel of a stage's forward: its FLOPs and the bytes it reads and writes.
struct RooflineOp {
  std::string name;
  double flop = 0;
  double bytes_moved = 0;
  bool tensor_core = false;  // a matmul: runs at the dtype's tensor-core peak
  bool again_in_backward = false;  // recomputed by the backward (the chunked loss's logits)
};

// Note [Roofline]: an op takes max(flop / peak, bytes_moved / memory bandwidth), its
// roofline bound; a stage's forward is the sum over its ops (per op, not per stage:
// a matmul-bound op does not hide a memory-bound one). The backward takes 2x the
// forward (the standard estimate: two matmuls -- input and weight gradient -- per
// forward matmul, and an elementwise backward reads about twice what its forward
// did), plus the forward ops the backward runs again (again_in_backward: the chunked
// loss recomputes its logits). Peaks are never reached in practice, so absolute times are optimistic (real
// kernels reach 40-70% of them); the ratios between stages, which is what the solver
// trades, are those of the model.
double roofline_ms(const RooflineOp& op, double peak_flop_per_s, double memory_bytes_per_s);
double peak_flop_per_s(const GpuSpec& gpu, Dtype dtype);  // throws for bf16 on a GPU without it
// A stage's forward on `gpu`: the sum of its ops' rooflines, matmuls at the dtype's
// tensor-core peak and the rest at the fp32 peak.
double stage_forward_roofline_ms(const std::vector<RooflineOp>& ops, const GpuSpec& gpu, Dtype dtype);

// The forward kernels of every stage, in stage order (model/gpt2.cpp's ops).
std::vector<std::vector<RooflineOp>> gpt2_stage_ops(const gpt2::Gpt2Config& config,
                                                    const gpt2::Gpt2Workload& workload, Dtype dtype);

// Parameters + gradients + AdamW's two moments. fp32: 4 + 4 + 8 = 16 bytes per
// parameter. fp16/bf16 mixed precision: 2 (weights) + 2 (gradients) + 4 (fp32 master
// copy) + 8 (fp32 moments) = 16 as well (ZeRO, Rajbhandari et al. 2020, section 3.1).
int64_t gpt2_static_bytes(const gpt2::Gpt2Config& config, Dtype dtype);

struct EstimateOptions {
  gpt2::Gpt2Config config;
  gpt2::Gpt2Workload workload;
  GpuSpec gpu;
  Dtype dtype = Dtype::Fp32;
  std::string preset;   // informational, e.g. "xl"
  std::string command;  // recorded in the profile so that it can be regenerated
};

// The profile (docs/formats.md, "profile.json", with "measured": false) and its JSON, which adds per
// stage "fwd_flop", "fwd_bytes_moved" and "fwd_tmp_grad_bytes"/"fwd_tmp_nograd_bytes".
struct Estimate {
  solver::Profile profile;
  std::vector<double> fwd_flop, fwd_bytes_moved;
  std::vector<StageBytes> bytes;
};
Estimate estimate_gpt2(const EstimateOptions& options);
nlohmann::ordered_json estimate_json(const Estimate& estimate, const EstimateOptions& options);

}  // namespace memopt::gpt2
