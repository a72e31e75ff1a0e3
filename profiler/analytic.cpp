// analytic.cpp: GPT-2's stages replayed as allocations on a tape. Each op of
// runtime/gpt2.cpp appears here with the tensors it creates (and the scratch its CPU
// kernel takes), what autograd saves, and when the code drops its reference (Note
// [Tensor lifetimes] in gpt2.cpp). Under autograd a saved tensor outlives its last
// reference; without grad it does not.
#include "profiler/analytic.h"

#include <algorithm>
#include <stdexcept>

namespace memopt::profiler {
namespace {

constexpr int64_t kFloatBytes = 4;
constexpr int64_t kBoolBytes = 1;

// Live bytes of one stage's forward, relative to before it starts. Id -1 is the
// stage's input: it exists before and after, so saving or dropping it changes nothing.
class Tape {
 public:
  using Id = int;
  static constexpr Id kInput = -1;

  explicit Tape(bool grad) : grad_(grad) {}

  Id make(int64_t bytes) {
    tensors_.push_back({bytes, false, true});
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return static_cast<Id>(tensors_.size()) - 1;
  }
  // A kernel's private buffer, allocated and freed inside one op.
  void scratch(int64_t bytes) { peak_bytes_ = std::max(peak_bytes_, live_bytes_ + bytes); }
  void save(Id id) {
    if (grad_ && id != kInput) tensors_.at(static_cast<size_t>(id)).saved = true;
  }
  void drop(Id id) {
    if (id == kInput) return;
    Tensor& t = tensors_.at(static_cast<size_t>(id));
    if (!t.alive) throw std::logic_error("analytic tape: tensor dropped twice");
    t.alive = false;
    if (!t.saved) live_bytes_ -= t.bytes;
  }
  int64_t bytes(Id id) const { return tensors_.at(static_cast<size_t>(id)).bytes; }
  int64_t live_bytes() const { return live_bytes_; }
  int64_t peak_bytes() const { return peak_bytes_; }

 private:
  struct Tensor {
    int64_t bytes;
    bool saved;
    bool alive;  // referenced by the code
  };
  bool grad_;
  std::vector<Tensor> tensors_;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
};

// The ops of gpt2.cpp on a tape. Helpers never drop their input: call sites do, where
// gpt2.cpp's code lets go of it.
class Gpt2Ops {
 public:
  using Id = Tape::Id;
  Gpt2Ops(Tape& tape, const runtime::Gpt2Config& c, const runtime::Gpt2Workload& w, int threads)
      : t(tape), c(c), threads(threads), N(w.batch * w.seq_len), C(c.n_embd), H(c.n_head), T(w.seq_len),
        V(c.vocab_size), BHTT(w.batch * c.n_head * w.seq_len * w.seq_len) {}

  // The CPU flash kernel's per-thread float buffer: a q-block x kv-block score tile,
  // the block's running max and sum, and its q-block x D output accumulator. The
  // q block is 256 rows from T >= 768, 64 from T >= 192, else 32; kv blocks are 512.
  int64_t flash_scratch_bytes() const {
    const int64_t q_split = std::min<int64_t>(T >= 768 ? 256 : T >= 192 ? 64 : 32, T);
    const int64_t kv_split = std::min<int64_t>(512, T);
    return kFloatBytes * threads * (q_split * kv_split + 2 * q_split + q_split * c.head_dim());
  }

  // native_layer_norm: output, mean and rstd (one float per row); autograd saves the
  // input, mean and rstd; the public layer_norm drops mean and rstd at once.
  Id layer_norm(Id in) {
    const Id out = t.make(kFloatBytes * N * C);
    const Id mean = t.make(kFloatBytes * N), rstd = t.make(kFloatBytes * N);
    t.save(in);
    t.save(mean);
    t.save(rstd);
    t.drop(mean);
    t.drop(rstd);
    return out;
  }
  // addmm / mm on the flattened input: only the output; autograd saves the input.
  Id linear(Id in, int64_t out_features) {
    const Id out = t.make(kFloatBytes * N * out_features);
    t.save(in);
    return out;
  }
  // native_dropout on CPU: a bool mask drawn in place by bernoulli_, then
  // input.mul(mask) casts the mask to a float temporary (CPU TensorIterator promotes
  // inputs by copying them) and allocates the output. Autograd saves the bool mask.
  // Kernels::Memopt (runtime/kernel_ops.h): the output only; autograd keeps the
  // Philox key, three scalars, and no tensor.
  Id dropout(Id in, int64_t numel, double p) {
    if (p == 0.0) return in;
    if (c.kernels == runtime::Kernels::Memopt) return t.make(kFloatBytes * numel);
    const Id mask = t.make(kBoolBytes * numel);
    const Id promoted = t.make(kFloatBytes * numel);
    const Id out = t.make(kFloatBytes * numel);
    t.drop(promoted);
    t.save(mask);
    t.drop(mask);
    return out;
  }

  Id embed() {
    const Id tok = t.make(kFloatBytes * N * C);  // at::embedding; saves the ids (the input)
    const Id sum = t.make(kFloatBytes * N * C);  // + wpe[:T] (a slice: no allocation)
    t.drop(tok);
    const Id out = dropout(sum, N * C, c.embd_pdrop);
    if (out != sum) t.drop(sum);
    return out;
  }

  Id attention_half(Id x) {
    const Id h = layer_norm(x);
    const Id qkv = linear(h, 3 * C);
    t.drop(h);
    Id y = -2;  // (B, H, T, D) attention output
    bool y_is_bthd = false;  // laid out (B, T, H, D): transpose(1, 2) is already contiguous
    if (c.attention == runtime::Attention::Explicit) {
      // matmul(q, k^T) on (B, H, T, D) views: reshape copies both to (B*H, T, D) for
      // bmm, which saves the copies.
      const Id qc = t.make(kFloatBytes * N * C), kc = t.make(kFloatBytes * N * C);
      const Id scores = t.make(kFloatBytes * BHTT);
      t.save(qc);
      t.save(kc);
      t.drop(qc);
      t.drop(kc);
      const Id probs = t.make(kFloatBytes * BHTT);  // softmax saves its result
      t.save(probs);
      t.drop(scores);
      const Id att = dropout(probs, BHTT, c.attn_pdrop);
      if (att != probs) t.drop(probs);
      const Id vc = t.make(kFloatBytes * N * C);  // matmul(att, v): v copied, att is contiguous
      y = t.make(kFloatBytes * N * C);
      t.save(att);
      t.save(vc);
      t.drop(vc);
      t.drop(att);
    } else if (c.attn_pdrop == 0.0) {
      // The CPU flash kernel: output laid out (B, T, H, D) and the logsumexp (B, H, T);
      // autograd saves q, k, v (views of qkv), the output and the logsumexp.
      y = t.make(kFloatBytes * N * C);
      const Id lse = t.make(kFloatBytes * N * H);
      t.scratch(flash_scratch_bytes());
      t.save(qkv);
      t.save(y);
      t.save(lse);
      t.drop(lse);
      y_is_bthd = true;
    } else {
      y = sdpa_math();
    }
    t.drop(qkv);  // q, k, v reset
    Id yc = y;
    if (!y_is_bthd) {
      yc = t.make(kFloatBytes * N * C);  // transpose(1, 2).contiguous()
      t.drop(y);
    }
    const Id proj = linear(yc, C);
    t.drop(yc);
    const Id r = dropout(proj, N * C, c.resid_pdrop);
    if (r != proj) t.drop(proj);
    const Id out = t.make(kFloatBytes * N * C);  // x + r
    t.drop(r);
    return out;
  }

  // at::_scaled_dot_product_attention_math, which the CPU takes when dropout is on
  // (the flash kernel refuses dropout). Its locals -- the scaled query and the float
  // causal mask -- live until it returns.
  Id sdpa_math() {
    const Id q_scaled = t.make(kFloatBytes * N * C);  // query * sqrt(scale)
    const Id ones = t.make(kBoolBytes * T * T);
    const Id tril = t.make(kBoolBytes * T * T);
    t.drop(ones);
    const Id mask = t.make(kFloatBytes * T * T);      // convert_boolean_attn_mask: zeros, then
    const Id not_mask = t.make(kBoolBytes * T * T);   // masked_fill_(logical_not(tril), -inf)
    t.drop(not_mask);
    t.drop(tril);
    const Id k_scaled = t.make(kFloatBytes * N * C);  // key^T * sqrt(scale)
    const Id qc = t.make(kFloatBytes * N * C), kc = t.make(kFloatBytes * N * C);  // matmul's reshape copies
    const Id scores = t.make(kFloatBytes * BHTT);
    t.save(qc);
    t.save(kc);
    t.drop(qc);
    t.drop(kc);
    t.drop(k_scaled);
    // _safe_softmax: softmax, then rows that are all -inf (isneginf, all) set to 0
    // in the softmax's own output (no second T x T tensor); saves that output.
    const Id probs = t.make(kFloatBytes * BHTT);
    const Id is_neg_inf = t.make(kBoolBytes * BHTT);
    const Id masked_rows = t.make(kBoolBytes * N * H);
    const Id zero = t.make(kFloatBytes);
    for (Id id : {is_neg_inf, masked_rows, zero}) t.drop(id);
    t.save(probs);
    t.drop(scores);
    // at::dropout on CPU: a float noise tensor (saved), then input * noise.
    const Id noise = t.make(kFloatBytes * BHTT);
    const Id att = t.make(kFloatBytes * BHTT);
    t.save(noise);
    t.drop(noise);
    t.drop(probs);
    const Id vc = t.make(kFloatBytes * N * C);
    const Id y = t.make(kFloatBytes * N * C);
    t.save(att);
    t.save(vc);
    t.drop(vc);
    t.drop(q_scaled);
    t.drop(mask);
    t.drop(att);  // the (output, attention) tuple dies
    return y;
  }

  Id mlp_half(Id x) {
    const Id h = layer_norm(x);
    const Id fc = linear(h, 4 * C);
    t.drop(h);
    // tanh-GELU saves its input. Kernels::Memopt: the bias-free linear's output
    // instead, which its fused bias + GELU saves -- the same bytes.
    const Id g = t.make(kFloatBytes * N * 4 * C);
    t.save(fc);
    t.drop(fc);
    const Id proj = linear(g, C);
    t.drop(g);
    const Id r = dropout(proj, N * C, c.resid_pdrop);
    if (r != proj) t.drop(proj);
    const Id out = t.make(kFloatBytes * N * C);  // x + r
    t.drop(r);
    return out;
  }

  Id block(Id x) {
    const Id mid = attention_half(x);
    const Id out = mlp_half(mid);
    t.drop(mid);
    return out;
  }

  Id head(Id x) {
    const Id h = layer_norm(x);
    const Id logits = linear(h, V);  // mm with the tied wte, no bias
    t.drop(h);
    const Id logp = t.make(kFloatBytes * N * V);  // log_softmax saves its result
    t.save(logp);
    t.drop(logits);
    const Id loss = t.make(kFloatBytes), total_weight = t.make(kFloatBytes);  // nll_loss: 0-dim each
    t.save(logp);
    t.save(total_weight);
    t.drop(total_weight);
    t.drop(logp);
    return loss;
  }

 private:
  Tape& t;
  const runtime::Gpt2Config& c;
  const int threads;
  const int64_t N, C, H, T, V, BHTT;
};

enum class StageKind { Embed, Block, AttentionHalf, MlpHalf, Head };

AnalyticStage replay(StageKind kind, const std::string& name, const runtime::Gpt2Config& c,
                     const runtime::Gpt2Workload& w, int threads) {
  auto run = [&](Tape& tape) {
    Gpt2Ops ops(tape, c, w, threads);
    switch (kind) {
      case StageKind::Embed: return ops.embed();
      case StageKind::Block: return ops.block(Tape::kInput);
      case StageKind::AttentionHalf: return ops.attention_half(Tape::kInput);
      case StageKind::MlpHalf: return ops.mlp_half(Tape::kInput);
      case StageKind::Head: return ops.head(Tape::kInput);
    }
    return Tape::kInput;
  };
  Tape grad(true), nograd(false);
  const Tape::Id out = run(grad);
  run(nograd);
  AnalyticStage s;
  s.name = name;
  s.out_bytes = grad.bytes(out);
  s.saved_bytes = grad.live_bytes();
  s.fwd_tmp_grad_bytes = grad.peak_bytes() - grad.live_bytes();
  s.fwd_tmp_nograd_bytes = nograd.peak_bytes() - nograd.live_bytes();
  return s;
}

}  // namespace

std::vector<AnalyticStage> gpt2_analytic_stages(const runtime::Gpt2Config& c, const runtime::Gpt2Workload& w,
                                                int threads) {
  if (std::string e = runtime::validate(c, w); !e.empty()) throw std::invalid_argument("gpt2: " + e);
  std::vector<AnalyticStage> stages;
  stages.push_back(replay(StageKind::Embed, "embed", c, w, threads));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string name = "h." + std::to_string(i);
    if (c.granularity == runtime::Granularity::Block) {
      stages.push_back(replay(StageKind::Block, name, c, w, threads));
    } else {
      stages.push_back(replay(StageKind::AttentionHalf, name + ".attn", c, w, threads));
      stages.push_back(replay(StageKind::MlpHalf, name + ".mlp", c, w, threads));
    }
  }
  stages.push_back(replay(StageKind::Head, "head", c, w, threads));
  return stages;
}

int64_t gpt2_analytic_input_bytes(const runtime::Gpt2Workload& w) { return 8 * w.batch * w.seq_len; }

int64_t gpt2_analytic_parameter_bytes(const runtime::Gpt2Config& c) {
  const int64_t C = c.n_embd;
  const int64_t per_block = 2 * 2 * C                  // ln_1, ln_2
                            + C * 3 * C + 3 * C        // c_attn
                            + C * C + C                // attn c_proj
                            + C * 4 * C + 4 * C        // c_fc
                            + 4 * C * C + C;           // mlp c_proj
  return kFloatBytes * (c.vocab_size * C + c.n_positions * C + c.n_layer * per_block + 2 * C);
}

}  // namespace memopt::profiler
