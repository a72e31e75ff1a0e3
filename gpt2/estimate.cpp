// estimate.cpp: the modeled GPT-2 profile -- analytic bytes rescaled to the dtype
// (Note [Activation dtype]), roofline times (Note [Roofline]).
#include "gpt2/estimate.h"

#include <algorithm>
#include <stdexcept>

#include "gpt2/analytic.h"

namespace memopt::gpt2 {
namespace {

constexpr int64_t kFp32 = 4;

using Kind = StageKind;

// Note [GPU attention]
gpt2::Gpt2Config gpu_config(gpt2::Gpt2Config c) {
  if (c.attention == gpt2::Attention::Sdpa) c.attn_pdrop = 0.0;
  return c;
}

struct Shapes {
  int64_t N, C, H, T, V, BH, D, BHTT;
  Shapes(const gpt2::Gpt2Config& c, const gpt2::Gpt2Workload& w)
      : N(w.batch * w.seq_len), C(c.n_embd), H(c.n_head), T(w.seq_len), V(c.vocab_size), BH(w.batch * c.n_head),
        D(c.n_embd / c.n_head), BHTT(w.batch * c.n_head * w.seq_len * w.seq_len) {}
};

// The bool mask a dropout of `numel` elements saves: none with memopt's kernels,
// which regenerate it from a Philox key (Note [Kernel choice] in gpt2/config.h).
int64_t dropout_mask_bytes(const gpt2::Gpt2Config& c, double p, int64_t numel) {
  return p > 0 && c.kernels == gpt2::Kernels::Aten ? numel : 0;
}

// Bytes of saved_bytes that do not scale with the dtype (Note [Activation dtype]).
int64_t fixed_saved_bytes(Kind kind, const gpt2::Gpt2Config& c, const Shapes& s) {
  const int64_t ln_stats = 2 * s.N * kFp32;
  const int64_t resid_mask = dropout_mask_bytes(c, c.resid_pdrop, s.N * s.C);
  const int64_t attn_mask = dropout_mask_bytes(c, c.attn_pdrop, s.BHTT);
  int64_t attention = ln_stats + resid_mask;
  if (c.attention == gpt2::Attention::Explicit) attention += attn_mask;
  else attention += s.N * s.H * kFp32;  // logsumexp
  const int64_t mlp = ln_stats + resid_mask;
  switch (kind) {
    case Kind::Embed: return dropout_mask_bytes(c, c.embd_pdrop, s.N * s.C);
    case Kind::Block: return attention + mlp;
    case Kind::AttentionHalf: return attention;
    case Kind::MlpHalf: return mlp;
    case Kind::Ln1:
    case Kind::Ln2: return ln_stats;
    case Kind::AttentionCore: return attention - ln_stats - resid_mask;
    case Kind::AttentionSoftmax: return 0;
    case Kind::AttentionMix: return attn_mask;
    case Kind::AttentionProj:
    case Kind::MlpProj: return resid_mask;
    case Kind::AttentionQkv:
    case Kind::MlpFc:
    case Kind::MlpGelu: return 0;
    case Kind::Head:
      // Chunked: the log-sum-exp and the row count, fp32 in the kernel.
      if (c.loss == gpt2::Loss::Chunked) return ln_stats + s.N * kFp32 + kFp32;
      return ln_stats + s.N * s.V * kFp32 + 2 * kFp32;  // log-probs, loss, total weight
  }
  return 0;
}

int64_t scale(int64_t fp32_bytes, int64_t fixed_bytes, int64_t dtype_bytes) {
  return fixed_bytes + (fp32_bytes - fixed_bytes) * dtype_bytes / kFp32;
}

// The parts of the transients that stay fp32 in every dtype (Note [Activation dtype]);
// only the head has any.
struct FixedTransients {
  int64_t fwd_nograd_bytes = 0;
  int64_t bwd_bytes = 0;
};
FixedTransients fixed_transient_bytes(Kind kind, const gpt2::Gpt2Config& c, const Shapes& s) {
  if (kind != Kind::Head) return {};
  if (c.loss == gpt2::Loss::Chunked) {
    // One block of logits (the kernel's float rows) and, in the forward, the five
    // per-row vectors: running max, sum and target logit, log-sum-exp, row losses.
    const int64_t block =
        kFp32 * std::min(gpt2::kChunkedLossRows, s.N) * std::min(gpt2::kChunkedLossVocabBlock, s.V);
    return {block + 5 * s.N * kFp32, block};
  }
  // Forward: the fp32 log-probabilities. Backward: the gradients of the
  // log-probabilities (nll_loss's) and of the logits (log_softmax's), N x V each, less
  // nll_loss's fp32 total weight, released by then. They coexist at the head's
  // backward peak whenever 2 N V exceeds V C + N C, the weight and input gradients of
  // the lm_head's mm, which run after the log-probabilities are freed (N >= C
  // suffices); below that this over-estimates.
  return {s.N * s.V * kFp32, 2 * s.N * s.V * kFp32 - kFp32};
}

// Forward kernels, as model/gpt2.cpp runs them. d: bytes per activation element.
class OpList {
 public:
  OpList(const Shapes& s, int64_t d, gpt2::Kernels kernels) : s(s), d(static_cast<double>(d)), kernels(kernels) {}
  std::vector<RooflineOp> ops;

  void elementwise(const char* name, double read_elems, double write_elems, double extra_bytes = 0) {
    ops.push_back({name, 0, d * (read_elems + write_elems) + extra_bytes, false});
  }
  // batch x (m x k) @ (k x n); a weight (batch-shared) is read once.
  void matmul(const char* name, double m, double k, double n, double batch = 1, bool weight = true) {
    ops.push_back({name, 2 * batch * m * k * n, d * (batch * m * k + (weight ? k * n : batch * k * n) + batch * m * n),
                   true});
  }
  void layer_norm(const char* name) { elementwise(name, NC(), NC(), 2.0 * static_cast<double>(s.N) * kFp32); }
  // ATen's writes its bool mask; memopt's draws it from Philox and writes none.
  void dropout(const char* name, double elems, double p) {
    if (p > 0) elementwise(name, elems, elems, kernels == gpt2::Kernels::Aten ? elems : 0.0);
  }
  double NC() const { return static_cast<double>(s.N * s.C); }

  void embed(const gpt2::Gpt2Config& c) {
    elementwise("wte gather", NC(), NC(), 8.0 * static_cast<double>(s.N));
    elementwise("+ wpe", NC() + static_cast<double>(s.T * s.C), NC());
    dropout("embedding dropout", NC(), c.embd_pdrop);
  }
  // Explicit attention in its two parts (Note [Two attention-core stages]).
  void attention_softmax() {
    const double T = static_cast<double>(s.T), BH = static_cast<double>(s.BH), D = static_cast<double>(s.D);
    const double BHTT = static_cast<double>(s.BHTT);
    matmul("q @ k^T", T, D, T, BH, false);
    elementwise("scale", BHTT, BHTT);
    elementwise("causal mask", BHTT, BHTT, T * T);
    elementwise("softmax", BHTT, BHTT);
  }
  void attention_mix(const gpt2::Gpt2Config& c) {
    const double T = static_cast<double>(s.T), BH = static_cast<double>(s.BH), D = static_cast<double>(s.D);
    dropout("attention dropout", static_cast<double>(s.BHTT), c.attn_pdrop);
    matmul("att @ v", T, T, D, BH, false);
    elementwise("merge heads", NC(), NC());
  }
  void attention_core(const gpt2::Gpt2Config& c) {
    if (c.attention == gpt2::Attention::Explicit) {
      attention_softmax();
      attention_mix(c);
      return;
    }
    // Flash attention, causal: it skips the masked half of q k^T and att v.
    const double T = static_cast<double>(s.T), BH = static_cast<double>(s.BH), D = static_cast<double>(s.D);
    ops.push_back({"flash attention", 2 * BH * T * T * D,
                   d * 4 * NC() + 4.0 * static_cast<double>(s.N) * static_cast<double>(s.H), true});
    elementwise("merge heads", NC(), NC());
  }
  // c_proj from in_features, its dropout and the residual add.
  void projection_residual(const char* name, double in_features, const gpt2::Gpt2Config& c) {
    matmul(name, static_cast<double>(s.N), in_features, static_cast<double>(s.C));
    dropout("residual dropout", NC(), c.resid_pdrop);
    elementwise("residual add", 2 * NC(), NC());
  }
  // Explicit attention copies it to head-major q, k, v (Note [Head-major qkv] in
  // model/gpt2.cpp).
  void attention_qkv(const gpt2::Gpt2Config& c) {
    const double C = static_cast<double>(s.C);
    matmul("c_attn", static_cast<double>(s.N), C, 3 * C);
    if (c.attention == gpt2::Attention::Explicit) elementwise("head-major q, k, v", 3 * NC(), 3 * NC());
  }
  void mlp_fc() {
    const double C = static_cast<double>(s.C);
    matmul("c_fc", static_cast<double>(s.N), C, 4 * C);
  }
  void gelu() { elementwise("gelu", 4 * NC(), 4 * NC()); }
  void attention_half(const gpt2::Gpt2Config& c) {
    layer_norm("ln_1");
    attention_qkv(c);
    attention_core(c);
    projection_residual("attn c_proj", static_cast<double>(s.C), c);
  }
  void mlp_half(const gpt2::Gpt2Config& c) {
    layer_norm("ln_2");
    mlp_fc();
    gelu();
    projection_residual("mlp c_proj", 4.0 * static_cast<double>(s.C), c);
  }
  void head(const gpt2::Gpt2Config& c) {
    const double N = static_cast<double>(s.N), C = static_cast<double>(s.C), V = static_cast<double>(s.V);
    layer_norm("ln_f");
    matmul("lm_head (tied wte)", N, C, V);
    if (c.loss == gpt2::Loss::Chunked) {
      // Each block of logits is read back by the log-sum-exp; the backward makes the
      // logits again before its two gradient matmuls.
      ops.back().again_in_backward = true;
      ops.push_back({"online log-sum-exp", 0, d * N * V + 5 * kFp32 * N, false});
      return;
    }
    ops.push_back({"log_softmax (fp32 out)", 0, d * N * V + kFp32 * N * V, false});
    ops.push_back({"nll_loss", 0, kFp32 * N + 8 * N, false});
  }

 private:
  const Shapes& s;
  const double d;
  const gpt2::Kernels kernels;
};

}  // namespace

const DtypeInfo& info(Dtype dtype) {
  for (const DtypeInfo& i : kDtypes)
    if (i.value == dtype) return i;
  throw std::logic_error("dtype missing from kDtypes");
}

std::optional<Dtype> dtype_from_word(const std::string& word) {
  for (const DtypeInfo& i : kDtypes)
    if (word == i.word || word == i.json_name) return i.value;
  return std::nullopt;
}

std::vector<StageBytes> gpt2_stage_bytes(const gpt2::Gpt2Config& config, const gpt2::Gpt2Workload& workload,
                                         Dtype dtype) {
  const gpt2::Gpt2Config c = gpu_config(config);
  const Shapes s(c, workload);
  const int64_t d = info(dtype).bytes;
  const std::vector<AnalyticStage> analytic = gpt2_analytic_stages(c, workload);
  const std::vector<StageLayout> layout = stage_layout(c);
  std::vector<StageBytes> out;
  for (size_t i = 0; i < analytic.size(); ++i) {
    const AnalyticStage& a = analytic[i];
    const Kind kind = layout.at(i).kind;
    const bool head = kind == Kind::Head;
    StageBytes b;
    b.name = a.name;
    b.out_bytes = head ? a.out_bytes : scale(a.out_bytes, 0, d);  // the head's output is the fp32 loss
    b.saved_bytes = scale(a.saved_bytes, fixed_saved_bytes(kind, c, s), d);
    b.fwd_tmp_grad_bytes = scale(a.fwd_tmp_grad_bytes, 0, d);
    const FixedTransients fixed = fixed_transient_bytes(kind, c, s);
    b.fwd_tmp_nograd_bytes = scale(a.fwd_tmp_nograd_bytes, fixed.fwd_nograd_bytes, d);
    b.bwd_tmp_bytes = scale(a.bwd_tmp_bytes, fixed.bwd_bytes, d);
    b.carried_bytes = scale(a.carried_bytes, 0, d);
    out.push_back(b);
  }
  return out;
}

double peak_flop_per_s(const GpuSpec& gpu, Dtype dtype) {
  switch (dtype) {
    case Dtype::Fp32: return gpu.fp32_flop_per_s;
    case Dtype::Fp16: return gpu.fp16_flop_per_s;
    case Dtype::Bf16:
      if (gpu.bf16_flop_per_s <= 0)
        throw std::invalid_argument("--dtype bf16: the " + std::string(gpu.name) +
                                    " has no bf16 arithmetic; use --dtype fp16 (or fp32)");
      return gpu.bf16_flop_per_s;
  }
  return 0;
}

double roofline_ms(const RooflineOp& op, double peak, double memory_bytes_per_s) {
  return 1e3 * std::max(op.flop / peak, op.bytes_moved / memory_bytes_per_s);
}

double stage_forward_roofline_ms(const std::vector<RooflineOp>& ops, const GpuSpec& gpu, Dtype dtype) {
  const double peak = peak_flop_per_s(gpu, dtype);
  double ms = 0;
  for (const RooflineOp& op : ops) ms += roofline_ms(op, op.tensor_core ? peak : gpu.fp32_flop_per_s, gpu.memory_bytes_per_s);
  return ms;
}

std::vector<std::vector<RooflineOp>> gpt2_stage_ops(const gpt2::Gpt2Config& config,
                                                    const gpt2::Gpt2Workload& workload, Dtype dtype) {
  const gpt2::Gpt2Config c = gpu_config(config);
  const Shapes s(c, workload);
  std::vector<std::vector<RooflineOp>> out;
  for (const StageLayout& stage : stage_layout(c)) {
    OpList l(s, info(dtype).bytes, c.kernels);
    switch (stage.kind) {
      case Kind::Embed: l.embed(c); break;
      case Kind::Block: l.attention_half(c); l.mlp_half(c); break;
      case Kind::AttentionHalf: l.attention_half(c); break;
      case Kind::MlpHalf: l.mlp_half(c); break;
      case Kind::Ln1: l.layer_norm("ln_1"); break;
      case Kind::AttentionQkv: l.attention_qkv(c); break;
      case Kind::AttentionCore: l.attention_core(c); break;
      case Kind::AttentionSoftmax: l.attention_softmax(); break;
      case Kind::AttentionMix: l.attention_mix(c); break;
      case Kind::AttentionProj: l.projection_residual("attn c_proj", static_cast<double>(s.C), c); break;
      case Kind::Ln2: l.layer_norm("ln_2"); break;
      case Kind::MlpFc: l.mlp_fc(); break;
      case Kind::MlpGelu: l.gelu(); break;
      case Kind::MlpProj: l.projection_residual("mlp c_proj", 4.0 * static_cast<double>(s.C), c); break;
      case Kind::Head: l.head(c); break;
    }
    out.push_back(std::move(l.ops));
  }
  return out;
}

int64_t gpt2_static_bytes(const gpt2::Gpt2Config& config, Dtype) {
  return 16 * (gpt2_analytic_parameter_bytes(config) / kFp32);  // 16 B per parameter in all three
}

Estimate estimate_gpt2(const EstimateOptions& o) {
  if (std::string e = gpt2::validate(o.config, o.workload); !e.empty())
    throw std::invalid_argument("invalid model: " + e);
  const double peak = peak_flop_per_s(o.gpu, o.dtype);
  Estimate est;
  est.bytes = gpt2_stage_bytes(o.config, o.workload, o.dtype);
  const auto ops = gpt2_stage_ops(o.config, o.workload, o.dtype);
  const std::vector<StageLayout> layout = stage_layout(o.config);
  solver::Chain& chain = est.profile.chain;
  chain.input_bytes = gpt2_analytic_input_bytes(o.workload);
  for (size_t i = 0; i < est.bytes.size(); ++i) {
    const StageBytes& b = est.bytes[i];
    const double fwd_ms = stage_forward_roofline_ms(ops[i], o.gpu, o.dtype);
    double flop = 0, moved = 0, again_ms = 0;
    for (const RooflineOp& op : ops[i]) {
      flop += op.flop;
      moved += op.bytes_moved;
      if (op.again_in_backward) again_ms += stage_forward_roofline_ms({op}, o.gpu, o.dtype);
    }
    solver::Stage st;
    st.name = b.name;
    st.fwd_ms = fwd_ms;
    st.bwd_ms = 2 * fwd_ms + again_ms;  // Note [Roofline]
    st.out_bytes = b.out_bytes;
    st.saved_bytes = b.saved_bytes;
    // The max never under-predicts a forward's peak, whichever transient a reader uses;
    // fwd_keep_tmp_bytes makes fwd_keep exact for readers that know it.
    st.fwd_tmp_bytes = std::max(b.fwd_tmp_grad_bytes, b.fwd_tmp_nograd_bytes);
    st.fwd_keep_tmp_bytes = b.fwd_tmp_grad_bytes;
    st.bwd_tmp_bytes = b.bwd_tmp_bytes;
    st.carried_bytes = b.carried_bytes;
    st.role = stage_role(layout.at(i).kind);
    st.block = layout.at(i).block;
    // fp32 parameters per stage (Note [Parameter homes]); the head reads the tied wte,
    // homed at embed.
    st.param_bytes = kFp32 * home_parameter_count(layout.at(i).kind, o.config);
    if (layout.at(i).kind == Kind::Head) st.param_reads = {{0, kFp32 * o.config.vocab_size * o.config.n_embd}};
    chain.stages.push_back(st);
    est.fwd_flop.push_back(flop);
    est.fwd_bytes_moved.push_back(moved);
  }
  const LinkSpec link = gpu_link(o.gpu);
  chain.link = solver::Link{link.bytes_per_s, link.bytes_per_s};
  est.profile.measured = false;
  est.profile.static_bytes = gpt2_static_bytes(o.config, o.dtype);
  gpt2::Gpt2Spec spec;
  spec.config = o.config;
  spec.workload = o.workload;
  spec.preset = o.preset;
  est.profile.model = gpt2::gpt2_spec_to_json(spec);
  est.profile.model["dtype"] = info(o.dtype).json_name;
  est.profile.device = {{"kind", "cuda"},
                        {"name", std::string(o.gpu.name) + " (modeled)"},
                        {"fp32_flop_per_s", o.gpu.fp32_flop_per_s},
                        {"gpu", std::string(o.gpu.word)},
                        {"link", std::string(link.name)},
                        {"memory_bytes", o.gpu.memory_bytes},
                        {"memory_bytes_per_s", o.gpu.memory_bytes_per_s},
                        {"peak_flop_per_s", peak}};
  return est;
}

nlohmann::ordered_json estimate_json(const Estimate& est, const EstimateOptions& o) {
  const nlohmann::ordered_json profile = solver::profile_to_json(est.profile);
  // The note goes right after the version, as docs/formats.md, "How memopt writes its JSON files" orders it;
  // update() keeps the keys it replaces in place and appends the others in order.
  nlohmann::ordered_json j = {{"format", profile.at("format")}, {"version", profile.at("version")}};
  j["note"] = "MODELED, not measured: bytes from gpt2/analytic.h scaled to " + std::string(info(o.dtype).word) +
              " (Note [Activation dtype] in gpt2/estimate.h), times from a per-op roofline of the " +
              std::string(o.gpu.name) + " datasheet peaks (Note [Roofline]; backward = 2 x forward), link = " +
              std::string(gpu_link(o.gpu).name) + " achieved bandwidth. Regenerate with: " + o.command;
  j.update(profile);
  j["command"] = o.command;
  for (size_t i = 0; i < est.bytes.size(); ++i) {
    nlohmann::ordered_json& s = j["stages"][i];
    s["fwd_bytes_moved"] = est.fwd_bytes_moved[i];
    s["fwd_flop"] = est.fwd_flop[i];
    s["fwd_tmp_grad_bytes"] = est.bytes[i].fwd_tmp_grad_bytes;
    s["fwd_tmp_nograd_bytes"] = est.bytes[i].fwd_tmp_nograd_bytes;
  }
  return j;
}

}  // namespace memopt::gpt2
