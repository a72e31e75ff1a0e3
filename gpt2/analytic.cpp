// analytic.cpp: GPT-2's stages replayed as allocations on a tape. Each op of
// model/gpt2.cpp appears here with the tensors it creates (and the scratch its CPU
// kernel takes), what autograd saves, and when the code drops its reference (Note
// [Tensor lifetimes] in gpt2.cpp). Under autograd a saved tensor outlives its last
// reference; without grad it does not. Each op also records its autograd node -- what
// it saved, where its input gradients go and what its backward allocates -- so that
// the stage's backward can be replayed the way the engine runs it (Note [Backward
// replay]).
#include "gpt2/analytic.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <utility>
#include <vector>

namespace memopt::gpt2 {
namespace {

constexpr int64_t kFloatBytes = 4;
constexpr int64_t kBoolBytes = 1;
constexpr int64_t kDoubleBytes = 8;
constexpr int64_t kInt64Bytes = 8;

// Note [Backward replay]
// torch::autograd::backward runs a graph's nodes in decreasing sequence number, the
// reverse of their creation: the latest-created node not yet run is always ready,
// since everything that feeds it a gradient was created after it. So the tape runs
// its nodes backwards. For each node the engine
//   1. calls its backward, which allocates the input gradients and any kernel
//      scratch; a gradient for a broadcast input (a bias) is then reduced to the
//      input's shape, a new tensor (validate_outputs' sum_to);
//   2. drops the incoming gradients, then -- retain_graph is false -- what the node
//      saved (release_variables); a tensor goes with its last reference, so a saved
//      tensor shared by two nodes, or still held by the stage's caller, stays;
//   3. hands each input gradient to the node that made the input. A second gradient
//      for the same input is added in place when the buffer holds the only
//      reference to the first, and into a new tensor otherwise
//      (InputBuffer::accumulate). Only the residual stream's input meets this, and
//      its first gradient is the incoming one passed on by the residual add: a new
//      tensor when that is the caller's seed, in place when it is not;
//   4. runs AccumulateGrad, numbered above every other node, for the parameters the
//      node produced gradients for: it adds them into the .grad allocated before
//      measuring and drops them. The stage input's AccumulateGrad keeps its (sole)
//      gradient as x.grad: d_i, the x_i the profiler subtracts from the peak.
// Views, transposes, expands and clones only pass their incoming gradient on, so most
// are left out; the ones that matter -- their reshape copies, or several gradients
// meet there -- are nodes of their own (Note [Gradient layouts]).

// Live bytes of one stage, relative to before it starts: its forward, then (under
// autograd) its backward. Values are what the code holds -- tensors and views of
// them; storages are what the allocator sees, freed with their last reference.
class Tape {
 public:
  using Id = int;    // a value
  using Grad = int;  // a gradient's storage, during the backward
  static constexpr Id kInput = -1;  // the stage's input: exists before and after
  // At operator granularity (Note [Operator stages] in gpt2/stages.h) a second input
  // tensor beside the operator's own: the residual stream x of an attn.c_proj or
  // mlp.c_proj stage, or c_attn's output qkv of an attn.mix stage. It exists before,
  // and its gradient goes to its own AccumulateGrad, which steals a gradient no one
  // else holds and copies any other -- x's is the incoming one, passed on by the
  // residual add, which the caller still holds.
  static constexpr Id kBeside = -3;

  // What a node's backward sees: its incoming gradients and the tape to allocate on.
  class Step {
   public:
    Grad grad(int output_nr = 0) const { return incoming_.at(static_cast<size_t>(output_nr)); }
    // Whether the output_nr-th output got a gradient (outputs no one used get none).
    bool has_grad(int output_nr) const { return grad(output_nr) != kNoStorage; }
    Grad make(int64_t bytes) {
      const Grad g = tape_.new_storage(bytes, 1);
      locals_.push_back(g);
      return g;
    }
    // A kernel's temporary going away before the backward returns.
    void free(Grad g) {
      const auto it = std::find(locals_.begin(), locals_.end(), g);
      if (it == locals_.end()) throw std::logic_error("analytic tape: freeing a gradient the step does not own");
      locals_.erase(it);
      tape_.unref(g);
    }
    void scratch(int64_t bytes) { tape_.scratch(bytes); }
    // The gradient of the node's input_nr-th input: a new tensor or one it was given.
    void give(int input_nr, Grad g) {
      tape_.ref(g);
      outputs_.emplace_back(input_nr, g);
    }
    // A parameter's gradient, for its AccumulateGrad.
    void give_param(Grad g) {
      tape_.ref(g);
      params_.push_back(g);
    }

   private:
    friend class Tape;
    Step(Tape& tape, std::vector<Grad> incoming) : tape_(tape), incoming_(std::move(incoming)) {}
    Tape& tape_;
    std::vector<Grad> incoming_;
    std::vector<Grad> locals_;
    std::vector<std::pair<int, Grad>> outputs_;
    std::vector<Grad> params_;
  };
  using Backward = std::function<void(Step&)>;

  explicit Tape(bool grad) : grad_(grad) {}

  Id make(int64_t bytes) { return add_value(new_storage(bytes, 1)); }
  // A view: the base's storage stays while the view does.
  Id view(Id base) {
    const int storage = storage_of(base);
    ref(storage);
    return add_value(storage);
  }
  // A view of a parameter: autograd tracks it, but it holds no activation bytes.
  Id external() { return add_value(kNoStorage); }
  // A kernel's private buffer, allocated and freed inside one op.
  void scratch(int64_t bytes) { peak_bytes_ = std::max(peak_bytes_, live_bytes_ + bytes); }
  void drop(Id id) {
    if (id == kInput || id == kBeside) return;
    Value& v = values_.at(static_cast<size_t>(id));
    if (!v.alive) throw std::logic_error("analytic tape: value dropped twice");
    v.alive = false;
    unref(v.storage);
  }
  // The autograd node of an op: its inputs (whose gradients it produces, in order),
  // its outputs (whose gradients it takes; an in-place op lists its tensor in both),
  // what it saves, and its backward. Nothing without grad.
  void node(std::initializer_list<Id> inputs, std::initializer_list<Id> outputs, std::initializer_list<Id> saved,
            Backward backward) {
    if (!grad_) return;
    Node n;
    for (Id in : inputs) n.next.push_back(grad_fn(in));
    for (Id s : saved) {
      const int storage = storage_of(s);
      ref(storage);
      n.saved.push_back(storage);
    }
    n.num_outputs = static_cast<int>(outputs.size());
    n.backward = std::move(backward);
    const int index = static_cast<int>(nodes_.size());
    int slot = 0;
    for (Id out : outputs) values_.at(static_cast<size_t>(out)).grad_fn = {index, slot++};
    nodes_.push_back(std::move(n));
  }

  int64_t bytes(Id id) const {
    const int storage = storage_of(id);
    return storage == kNoStorage ? 0 : storages_.at(static_cast<size_t>(storage)).bytes;
  }
  int64_t live_bytes() const { return live_bytes_; }
  int64_t peak_bytes() const { return peak_bytes_; }

  // Runs the backward from `output`, seeded with a gradient the caller holds, as
  // Note [Backward replay] says; returns its peak above the live bytes it started from.
  int64_t backward_peak(Id output) {
    if (!grad_) throw std::logic_error("analytic tape: no backward without grad");
    const int64_t start = live_bytes_;
    peak_bytes_ = live_bytes_;
    buffers_.assign(nodes_.size(), {});
    for (size_t k = 0; k < nodes_.size(); ++k)
      buffers_[k].assign(static_cast<size_t>(nodes_[k].num_outputs), kNoStorage);
    // The seed is already allocated and the caller keeps it: one reference its own,
    // one the engine's.
    const Grad seed = static_cast<Grad>(storages_.size());
    storages_.push_back({bytes(output), 2});
    deliver(grad_fn(output), seed);
    for (int k = static_cast<int>(nodes_.size()) - 1; k >= 0; --k) run(k);
    if (input_grad_ != kNoStorage && storages_.at(static_cast<size_t>(input_grad_)).refs != 1)
      throw std::logic_error("analytic tape: the input's gradient is shared; AccumulateGrad would copy it");
    return peak_bytes_ - start;
  }

 private:
  static constexpr int kNoStorage = -1;
  // Where a value's gradient goes: a node's output slot, or the stage input's
  // AccumulateGrad (kToInput). kNone: nothing needs it.
  static constexpr int kNone = -1, kToInput = -2, kToBeside = -3;
  struct Edge {
    int node = kNone;
    int slot = 0;
  };
  struct Storage {
    int64_t bytes;
    int refs;
  };
  struct Value {
    int storage;
    Edge grad_fn;
    bool alive;  // referenced by the code
  };
  struct Node {
    std::vector<Edge> next;
    std::vector<int> saved;
    int num_outputs = 0;
    Backward backward;
  };

  int new_storage(int64_t bytes, int refs) {
    storages_.push_back({bytes, refs});
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return static_cast<int>(storages_.size()) - 1;
  }
  void ref(int storage) {
    if (storage != kNoStorage) ++storages_.at(static_cast<size_t>(storage)).refs;
  }
  void unref(int storage) {
    if (storage == kNoStorage) return;
    Storage& s = storages_.at(static_cast<size_t>(storage));
    if (s.refs <= 0) throw std::logic_error("analytic tape: storage released twice");
    if (--s.refs == 0) live_bytes_ -= s.bytes;
  }
  Id add_value(int storage) {
    values_.push_back({storage, {}, true});
    return static_cast<Id>(values_.size()) - 1;
  }
  int storage_of(Id id) const {
    return id == kInput || id == kBeside ? kNoStorage : values_.at(static_cast<size_t>(id)).storage;
  }
  Edge grad_fn(Id id) const {
    if (id == kInput) return Edge{kToInput, 0};
    if (id == kBeside) return Edge{kToBeside, 0};
    return values_.at(static_cast<size_t>(id)).grad_fn;
  }

  // Step 3 of Note [Backward replay]; the gradient's reference moves into the buffer.
  void deliver(Edge to, Grad g) {
    if (to.node == kNone) throw std::logic_error("analytic tape: a gradient for a value that needs none");
    if (to.node == kToBeside) {  // part of d_i from here on
      // AccumulateGrad steals a gradient no one else holds and copies any other
      // (Tape::kBeside).
      if (storages_.at(static_cast<size_t>(g)).refs > 1) {
        const Grad copy = new_storage(storages_.at(static_cast<size_t>(g)).bytes, 1);
        unref(g);
        g = copy;
      }
      beside_grads_.push_back(g);
      return;
    }
    Grad& slot = to.node == kToInput ? input_grad_
                                     : buffers_.at(static_cast<size_t>(to.node)).at(static_cast<size_t>(to.slot));
    if (slot == kNoStorage) {
      slot = g;
    } else if (storages_.at(static_cast<size_t>(slot)).refs == 1) {
      unref(g);  // added into the first in place
    } else {
      const Grad sum = new_storage(storages_.at(static_cast<size_t>(slot)).bytes, 1);
      unref(slot);
      unref(g);
      slot = sum;
    }
  }

  void run(int k) {
    Node& n = nodes_.at(static_cast<size_t>(k));
    std::vector<Grad> incoming = std::move(buffers_.at(static_cast<size_t>(k)));
    if (std::all_of(incoming.begin(), incoming.end(), [](Grad g) { return g == kNoStorage; })) return;
    Step step(*this, incoming);
    n.backward(step);
    for (Grad g : step.locals_) unref(g);  // the backward's own references end with it
    for (Grad g : incoming) unref(g);
    for (int s : n.saved) unref(s);
    n.saved.clear();
    for (const auto& [input_nr, g] : step.outputs_) deliver(n.next.at(static_cast<size_t>(input_nr)), g);
    for (Grad g : step.params_) unref(g);
  }

  bool grad_;
  std::vector<Storage> storages_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<std::vector<Grad>> buffers_;
  Grad input_grad_ = kNoStorage;
  std::vector<Grad> beside_grads_;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
};

using Id = Tape::Id;
using Grad = Tape::Grad;
using Step = Tape::Step;
using Backward = Tape::Backward;

// A node that hands its incoming gradient to its one input unchanged.
void pass_through(Step& s) { s.give(0, s.grad()); }

// Note [Scalar multiply backward]
// grad * python_scalar wraps the scalar in a 0-dim double tensor (8 bytes, through
// the CPU allocator) that TensorIterator casts to a float copy (4 bytes) before
// allocating the product; both go when the product is done.
Grad scalar_multiply(Step& s, int64_t numel) {
  const Grad wrapped = s.make(kDoubleBytes);
  const Grad cast = s.make(kFloatBytes);
  const Grad product = s.make(kFloatBytes * numel);
  s.free(cast);
  s.free(wrapped);
  return product;
}

// The ops of gpt2.cpp on a tape. Helpers never drop their input: call sites do, where
// gpt2.cpp's code lets go of it.
class Gpt2Ops {
 public:
  Gpt2Ops(Tape& tape, const gpt2::Gpt2Config& c, const gpt2::Gpt2Workload& w, int threads)
      : t(tape), c(c), threads(threads), N(w.batch * w.seq_len), C(c.n_embd), H(c.n_head), T(w.seq_len),
        V(c.vocab_size), BH(w.batch * c.n_head), BHTT(w.batch * c.n_head * w.seq_len * w.seq_len) {}

  // The CPU flash kernels split the queries into blocks of 256 rows from T >= 768, 64
  // from T >= 192, else 32, and the keys into blocks of 512.
  int64_t flash_q_block() const { return std::min<int64_t>(T >= 768 ? 256 : T >= 192 ? 64 : 32, T); }
  int64_t flash_kv_block() const { return std::min<int64_t>(512, T); }
  // The forward's per-thread float buffer: a score tile, the block's running max and
  // sum, and its q-block x D output accumulator.
  int64_t flash_scratch_bytes() const {
    const int64_t q = flash_q_block(), kv = flash_kv_block();
    return kFloatBytes * threads * (q * kv + 2 * q + q * c.head_dim());
  }

  // native_layer_norm: output, mean and rstd (one float per row); autograd saves the
  // input, mean and rstd; the public layer_norm drops mean and rstd at once. Backward:
  // dX, dgamma, dbeta, then the CPU kernel's {2, threads, C} buffer of per-thread
  // dgamma/dbeta partial sums.
  Id layer_norm(Id in) {
    const Id out = t.make(kFloatBytes * N * C);
    const Id mean = t.make(kFloatBytes * N), rstd = t.make(kFloatBytes * N);
    const int64_t n = N, c_ = C, threads_ = threads;
    t.node({in}, {out}, {in, mean, rstd}, [n, c_, threads_](Step& s) {
      const Grad dx = s.make(kFloatBytes * n * c_);
      const Grad dgamma = s.make(kFloatBytes * c_), dbeta = s.make(kFloatBytes * c_);
      s.scratch(kFloatBytes * 2 * threads_ * c_);
      s.give(0, dx);
      s.give_param(dgamma);
      s.give_param(dbeta);
    });
    t.drop(mean);
    t.drop(rstd);
    return out;
  }
  // nn::Linear (and at::linear) on (B, T, in): matmul flattens the input (a view), mm,
  // then the bias is added in place. Autograd saves the input. mm's backward makes the
  // weight's gradient first, then the input's; add_'s hands its incoming gradient on,
  // summed to the bias' shape.
  Id linear(Id in, int64_t in_features, int64_t out_features, bool bias) {
    const Id out = t.make(kFloatBytes * N * out_features);
    const int64_t n = N;
    t.node({in}, {out}, {in}, [n, in_features, out_features](Step& s) {
      const Grad dw = s.make(kFloatBytes * in_features * out_features);
      const Grad dx = s.make(kFloatBytes * n * in_features);
      s.give(0, dx);
      s.give_param(dw);
    });
    if (bias) {
      t.node({out}, {out}, {}, [out_features](Step& s) {
        s.give(0, s.grad());
        s.give_param(s.make(kFloatBytes * out_features));
      });
    }
    return out;
  }
  // Note [Dropout backward on CPU]
  // native_dropout on CPU: a bool mask drawn in place by bernoulli_, then
  // input.mul(mask) casts the mask to a float temporary (CPU TensorIterator promotes
  // inputs by copying them) and allocates the output. Autograd saves the bool mask.
  // Its backward, grad * mask * scale, repeats the promotion: the float mask copy and
  // the masked gradient, the copy freed, then the multiply by the scale (Note [Scalar
  // multiply backward]) and the masked gradient freed.
  // Kernels::Memopt (model/kernel_ops.h): the output only; autograd keeps the
  // Philox key, three scalars, and no tensor; backward allocates only the gradient.
  Id dropout(Id in, int64_t numel, double p) {
    if (p == 0.0) return in;
    if (c.kernels == gpt2::Kernels::Memopt) {
      const Id out = t.make(kFloatBytes * numel);
      t.node({in}, {out}, {}, [numel](Step& s) { s.give(0, s.make(kFloatBytes * numel)); });
      return out;
    }
    const Id mask = t.make(kBoolBytes * numel);
    const Id promoted = t.make(kFloatBytes * numel);
    const Id out = t.make(kFloatBytes * numel);
    t.drop(promoted);
    t.node({in}, {out}, {mask}, [numel](Step& s) {
      const Grad mask_float = s.make(kFloatBytes * numel);
      const Grad masked = s.make(kFloatBytes * numel);
      s.free(mask_float);
      s.give(0, scalar_multiply(s, numel));
      s.free(masked);
    });
    t.drop(mask);
    return out;
  }
  // x + r: both gradients are the incoming one itself.
  Id residual_add(Id x, Id r) {
    const Id out = t.make(kFloatBytes * N * C);
    t.node({x, r}, {out}, {}, [](Step& s) {
      s.give(0, s.grad());
      s.give(1, s.grad());
    });
    return out;
  }

  // Note [Embedding operand order]
  // at::embedding(wte, ids) + wpe.narrow(0, 0, T): C++ leaves the order of operator+'s
  // operands open, and GCC evaluates the narrow first, so the slice's node is older
  // than the embedding's and its backward runs last. (Evaluated the other way, the
  // slice's n_positions x C gradient would come and go before the embedding's V x C
  // one instead of after it, changing the embed stage's peak; the analytic test would
  // say so.) Backward: the add hands the embedding its gradient and sums the
  // broadcast one to (T, C); embedding_dense_backward scatters into a zeroed V x C
  // gradient; slice_backward copies the (T, C) gradient into a zeroed n_positions x C
  // one.
  Id embed() {
    const Id pos = t.external();
    const int64_t n_positions = c.n_positions, c_ = C, t_ = T, v_ = V;
    t.node({}, {pos}, {}, [n_positions, c_](Step& s) { s.give_param(s.make(kFloatBytes * n_positions * c_)); });
    const Id tok = t.make(kFloatBytes * N * C);
    // Note [Loss choice]: with the chunked loss the lookup's backward adds into
    // wte.grad in place (index_add_) and allocates nothing.
    if (c.loss == gpt2::Loss::Chunked)
      t.node({}, {tok}, {Tape::kInput}, [](Step&) {});
    else
      t.node({}, {tok}, {Tape::kInput}, [v_, c_](Step& s) { s.give_param(s.make(kFloatBytes * v_ * c_)); });
    const Id sum = t.make(kFloatBytes * N * C);  // + wpe[:T] (a slice: no allocation)
    t.node({tok, pos}, {sum}, {}, [t_, c_](Step& s) {
      s.give(0, s.grad());
      s.give(1, s.make(kFloatBytes * t_ * c_));
    });
    t.drop(tok);
    const Id out = dropout(sum, N * C, c.embd_pdrop);
    if (out != sum) t.drop(sum);
    return out;
  }

  // Note [Gradient layouts]
  // With sdpa (Note [Head-major qkv] in model/gpt2.cpp; explicit attention's
  // contiguous slices need none of this), q, k and v are (B, H, T, D) transposes of
  // (B, T, C) slices of c_attn's output; the
  // backward of each view(B, T, H, D) reshapes its gradient back to (B, T, C), which
  // copies unless that gradient is laid out (B, T, H, D). The flash kernel writes its
  // gradients so, hence no copy. A bmm gradient is contiguous (B*H, T, D): q's and v's
  // copy; k's is contiguous (B*H, D, T), k^T's, which after both transposes is viewable
  // as (B, T, C), so it does not. Likewise matmul's output (B*H, T, T) or (B*H, T, D)
  // is viewed to (B, H, ...): the att @ v product gets its gradient through the
  // merge-heads transpose, not contiguous, so reshape copies it; q @ k^T gets a
  // contiguous one. (The sdpa math path's scalar multiplies of q and k^T keep their
  // gradient's layout, so the same holds there.)
  Id heads(Id part, bool copies) {
    const Id out = t.view(part);
    const int64_t bytes = kFloatBytes * N * C;
    if (copies) t.node({part}, {out}, {}, [bytes](Step& s) { s.give(0, s.make(bytes)); });
    else t.node({part}, {out}, {}, pass_through);
    return out;
  }
  // bmm (a batched matmul's core): mat2's gradient first, then self's.
  Backward bmm_backward(int64_t self_bytes, int64_t mat2_bytes) const {
    return [self_bytes, mat2_bytes](Step& s) {
      const Grad d_mat2 = s.make(mat2_bytes);
      const Grad d_self = s.make(self_bytes);
      s.give(0, d_self);
      s.give(1, d_mat2);
    };
  }
  // matmul(a, b) on (B, H, ., .) operands, given the copies reshape made for bmm (the
  // ones it saves) and the output: the bmm node, then the view of its output, a node
  // of its own when its backward copies (Note [Gradient layouts]).
  void batched_matmul(Id a, Id b, Id out, std::initializer_list<Id> saved, int64_t a_bytes, int64_t b_bytes,
                      bool out_grad_copies) {
    t.node({a, b}, {out}, saved, bmm_backward(a_bytes, b_bytes));
    const int64_t out_bytes = t.bytes(out);
    if (out_grad_copies) t.node({out}, {out}, {}, [out_bytes](Step& s) { s.give(0, s.make(out_bytes)); });
  }
  // softmax, _safe_softmax and log_softmax save their result; backward allocates the
  // input's gradient.
  void softmax(Id in, Id out) {
    const int64_t bytes = t.bytes(out);
    t.node({in}, {out}, {out}, [bytes](Step& s) { s.give(0, s.make(bytes)); });
  }

  // The QKV projection, its own stage at operator granularity, in the layout the core
  // reads (Note [Head-major qkv] in model/gpt2.cpp): with explicit attention the
  // (B, T, 3C) output is copied to (3, B, H, T, D) and freed; the copy's backward
  // permutes the gradient back and reshape copies it to (B, T, 3C) for the linear.
  Id attention_qkv(Id h) {
    const Id out = linear(h, C, 3 * C, true);
    if (c.attention != gpt2::Attention::Explicit) return out;
    const int64_t bytes = kFloatBytes * N * 3 * C;
    const Id head_major = t.make(bytes);
    t.node({out}, {head_major}, {}, [bytes](Step& s) { s.give(0, s.make(bytes)); });
    t.drop(out);
    return head_major;
  }

  // Three views of qkv: sdpa's qkv.split(C, 2), explicit attention's unbind(0) of
  // the head-major copy. Either backward concatenates (or stacks) their gradients into
  // a new tensor of qkv's size, zeros standing in for the parts that got none (an
  // operator stage uses only some), freed after the concatenation: split's zeros are
  // whole parts, unbind's a 0-dim zero expanded to the part's shape.
  std::vector<Id> split_qkv(Id qkv) {
    const std::vector<Id> parts = {t.view(qkv), t.view(qkv), t.view(qkv)};
    const int64_t part_bytes = kFloatBytes * N * C;
    const int64_t zero_bytes = c.attention == gpt2::Attention::Explicit ? kFloatBytes : part_bytes;
    t.node({qkv}, {parts[0], parts[1], parts[2]}, {}, [part_bytes, zero_bytes](Step& s) {
      std::vector<Grad> zeros;
      for (int i = 0; i < 3; ++i)
        if (!s.has_grad(i)) zeros.push_back(s.make(zero_bytes));
      const Grad cat = s.make(3 * part_bytes);
      for (Grad z : zeros) s.free(z);
      s.give(0, cat);
    });
    return parts;
  }

  // Explicit attention's probabilities from q and k: matmul(q, k^T) on contiguous
  // (B, H, T, D) slices of the head-major qkv, which reshape views as (B*H, T, D) (k^T
  // transposed) and bmm saves as they are; scaled and masked in place -- nothing saved
  // (the mask is a buffer); their backwards allocate the scaled and the masked
  // gradient -- then the softmax.
  Id attention_probabilities(Id q, Id k) {
    const Id scores = t.make(kFloatBytes * BHTT);
    batched_matmul(q, k, scores, {q, k}, kFloatBytes * N * C, kFloatBytes * N * C, false);
    const int64_t bhtt = BHTT;
    t.node({scores}, {scores}, {}, [bhtt](Step& s) { s.give(0, scalar_multiply(s, bhtt)); });
    t.node({scores}, {scores}, {}, [bhtt](Step& s) { s.give(0, s.make(kFloatBytes * bhtt)); });
    const Id probs = t.make(kFloatBytes * BHTT);
    softmax(scores, probs);
    t.drop(scores);
    return probs;
  }

  // Their dropout and the product with v, (B, H, T, D).
  Id weigh_values(Id probs, Id v) {
    const Id att = dropout(probs, BHTT, c.attn_pdrop);
    if (att != probs) t.drop(probs);
    const Id y = t.make(kFloatBytes * N * C);  // matmul(att, v): both contiguous, saved as they are
    batched_matmul(att, v, y, {att, v}, kFloatBytes * BHTT, kFloatBytes * N * C, true);
    t.drop(att);
    return y;
  }

  // (B, H, T, D) -> (B, T, C): transpose(1, 2).contiguous(), a clone that passes its
  // gradient on.
  Id merge_heads(Id y) {
    const Id yc = t.make(kFloatBytes * N * C);
    t.node({y}, {yc}, {}, pass_through);
    t.drop(y);
    return yc;
  }

  // From c_attn's output to the merged heads' (B, T, C) output, ready for c_proj.
  Id attention_core(Id qkv) {
    const bool flash = c.attention == gpt2::Attention::Sdpa && c.attn_pdrop == 0.0;
    const std::vector<Id> parts = split_qkv(qkv);
    t.drop(qkv);  // the c_attn output was a temporary; the views hold its storage
    if (c.attention == gpt2::Attention::Explicit) {
      const Id y = weigh_values(attention_probabilities(parts[0], parts[1]), parts[2]);
      for (Id part : parts) t.drop(part);
      return merge_heads(y);
    }
    // Which views copy their gradient: Note [Gradient layouts].
    const Id q = heads(parts[0], !flash), k = heads(parts[1], false), v = heads(parts[2], !flash);
    for (Id part : parts) t.drop(part);
    Id y = -2;  // (B, H, T, D) attention output
    bool y_is_bthd = false;  // laid out (B, T, H, D): transpose(1, 2) is already contiguous
    if (flash) {
      // The CPU flash kernel: output laid out (B, T, H, D) and the logsumexp (B, H, T);
      // autograd saves q, k, v (views of qkv), the output and the logsumexp.
      y = t.make(kFloatBytes * N * C);
      const Id lse = t.make(kFloatBytes * N * H);
      t.scratch(flash_scratch_bytes());
      t.node({q, k, v}, {y, lse}, {q, k, v, y, lse}, flash_backward());
      t.drop(lse);
      y_is_bthd = true;
    } else {
      y = sdpa_math(q, k, v);
    }
    // q, k, v reset: the last views of qkv, unless the flash node saved them.
    t.drop(q);
    t.drop(k);
    t.drop(v);
    return y_is_bthd ? y : merge_heads(y);
  }

  // Explicit attention's two operator stages (Note [Two attention-core stages] in
  // gpt2/stages.h): qkv is the stage's input, which its caller holds.
  Id attention_softmax(Id qkv) {
    const std::vector<Id> parts = split_qkv(qkv);
    const Id probs = attention_probabilities(parts[0], parts[1]);
    for (Id part : parts) t.drop(part);
    return probs;
  }
  Id attention_mix(Id probs, Id qkv) {
    const std::vector<Id> parts = split_qkv(qkv);
    const Id y = weigh_values(probs, parts[2]);
    for (Id part : parts) t.drop(part);
    return merge_heads(y);
  }

  // c_proj, its dropout and the residual add: the end of either half.
  Id projection_residual(Id in, int64_t in_features, Id x) {
    const Id proj = linear(in, in_features, C, true);
    t.drop(in);
    const Id r = dropout(proj, N * C, c.resid_pdrop);
    if (r != proj) t.drop(proj);
    const Id out = residual_add(x, r);
    t.drop(r);
    return out;
  }

  Id attention_half(Id x) {
    const Id h = layer_norm(x);
    const Id qkv = attention_qkv(h);
    t.drop(h);
    return projection_residual(attention_core(qkv), C, x);
  }

  // Note [Flash attention backward on CPU]
  // _scaled_dot_product_flash_attention_for_cpu_backward zeroes dq, dk and dv laid out
  // (B, T, H, D), then its kernel takes a per-thread float buffer of two q-block x
  // kv-block tiles (the recomputed probabilities and their gradient) and, per thread's
  // share of the B*H heads, a q-block float row sum; the incoming gradient is already
  // (B, T, H, D)-contiguous, so the kernel's contiguous() copies nothing.
  Backward flash_backward() const {
    const int64_t grad_bytes = kFloatBytes * N * C;
    const int64_t q = flash_q_block(), kv = flash_kv_block();
    const int64_t buffer_bytes = kFloatBytes * threads * 2 * q * kv;
    const int64_t row_sum_bytes = kFloatBytes * std::min<int64_t>(threads, BH) * q;
    return [grad_bytes, buffer_bytes, row_sum_bytes](Step& s) {
      const Grad dq = s.make(grad_bytes), dk = s.make(grad_bytes), dv = s.make(grad_bytes);
      const Grad buffer = s.make(buffer_bytes);
      const Grad row_sums = s.make(row_sum_bytes);
      s.free(row_sums);
      s.free(buffer);
      s.give(0, dq);
      s.give(1, dk);
      s.give(2, dv);
    };
  }

  // at::_scaled_dot_product_attention_math, which the CPU takes when dropout is on
  // (the flash kernel refuses dropout). Its locals -- the scaled query and the float
  // causal mask -- live until it returns.
  Id sdpa_math(Id q, Id k, Id v) {
    const int64_t nc = N * C, bhtt = BHTT;
    const Id q_scaled = t.make(kFloatBytes * N * C);  // query * sqrt(scale)
    t.node({q}, {q_scaled}, {}, [nc](Step& s) { s.give(0, scalar_multiply(s, nc)); });
    const Id ones = t.make(kBoolBytes * T * T);
    const Id tril = t.make(kBoolBytes * T * T);
    t.drop(ones);
    const Id mask = t.make(kFloatBytes * T * T);      // convert_boolean_attn_mask: zeros, then
    const Id not_mask = t.make(kBoolBytes * T * T);   // masked_fill_(logical_not(tril), -inf)
    t.drop(not_mask);
    t.drop(tril);
    const Id k_scaled = t.make(kFloatBytes * N * C);  // key^T * sqrt(scale); the transpose passes through
    t.node({k}, {k_scaled}, {}, [nc](Step& s) { s.give(0, scalar_multiply(s, nc)); });
    const Id qc = t.make(kFloatBytes * N * C), kc = t.make(kFloatBytes * N * C);  // matmul's reshape copies
    const Id scores = t.make(kFloatBytes * BHTT);
    batched_matmul(q_scaled, k_scaled, scores, {qc, kc}, kFloatBytes * N * C, kFloatBytes * N * C, false);
    t.drop(qc);
    t.drop(kc);
    t.drop(k_scaled);
    t.node({scores}, {scores}, {}, pass_through);  // + mask, in place
    // _safe_softmax: softmax, then rows that are all -inf (isneginf, all) set to 0
    // in the softmax's own output (no second T x T tensor); saves that output.
    const Id probs = t.make(kFloatBytes * BHTT);
    const Id is_neg_inf = t.make(kBoolBytes * BHTT);
    const Id masked_rows = t.make(kBoolBytes * N * H);
    const Id zero = t.make(kFloatBytes);
    for (Id id : {is_neg_inf, masked_rows, zero}) t.drop(id);
    softmax(scores, probs);
    t.drop(scores);
    // at::dropout on CPU: a float noise tensor, then input * noise, which saves the
    // noise (the input needs no saving: the noise needs no gradient).
    const Id noise = t.make(kFloatBytes * BHTT);
    const Id att = t.make(kFloatBytes * BHTT);
    t.node({probs}, {att}, {noise}, [bhtt](Step& s) { s.give(0, s.make(kFloatBytes * bhtt)); });
    t.drop(noise);
    t.drop(probs);
    const Id vc = t.make(kFloatBytes * N * C);
    const Id y = t.make(kFloatBytes * N * C);
    batched_matmul(att, v, y, {att, vc}, kFloatBytes * BHTT, kFloatBytes * N * C, true);
    t.drop(vc);
    t.drop(q_scaled);
    t.drop(mask);
    t.drop(att);  // the (output, attention) tuple dies
    return y;
  }

  // c_fc: with Kernels::Memopt the bias-free linear, whose output the fused bias +
  // GELU saves (and the bias); its backward allocates the input's gradient, then the
  // bias'. Aten: the linear with its bias, then tanh-GELU, which saves its input -- the
  // same bytes -- and whose backward allocates the input's gradient.
  Id mlp_fc(Id h) { return linear(h, C, 4 * C, c.kernels != gpt2::Kernels::Memopt); }
  Id mlp_gelu(Id fc) {
    const Id g = t.make(kFloatBytes * N * 4 * C);
    const int64_t nc4 = N * 4 * C, c4 = 4 * C;
    if (c.kernels == gpt2::Kernels::Memopt) {
      t.node({fc}, {g}, {fc}, [nc4, c4](Step& s) {
        const Grad dh = s.make(kFloatBytes * nc4);
        s.give_param(s.make(kFloatBytes * c4));
        s.give(0, dh);
      });
    } else {
      t.node({fc}, {g}, {fc}, [nc4](Step& s) { s.give(0, s.make(kFloatBytes * nc4)); });
    }
    t.drop(fc);
    return g;
  }

  Id mlp_half(Id x) {
    const Id h = layer_norm(x);
    const Id fc = mlp_fc(h);
    t.drop(h);
    return projection_residual(mlp_gelu(fc), 4 * C, x);
  }

  Id block(Id x) {
    const Id mid = attention_half(x);
    const Id out = mlp_half(mid);
    t.drop(mid);
    return out;
  }

  Id head(Id x) {
    if (c.loss == gpt2::Loss::Chunked) return chunked_head(x);
    const Id h = layer_norm(x);
    const Id logits = linear(h, C, V, false);  // mm with the tied wte, no bias
    t.drop(h);
    const Id logp = t.make(kFloatBytes * N * V);  // log_softmax saves its result
    softmax(logits, logp);
    t.drop(logits);
    // nll_loss: a 0-dim loss and total weight, saving the log-probabilities and the
    // total weight; its backward zeroes an N x V gradient and scatters into it.
    const Id loss = t.make(kFloatBytes), total_weight = t.make(kFloatBytes);
    const int64_t nv = N * V;
    t.node({logp}, {loss}, {logp, total_weight}, [nv](Step& s) { s.give(0, s.make(kFloatBytes * nv)); });
    t.drop(total_weight);
    t.drop(logp);
    return loss;
  }

  // Note [Loss choice], Chunked: model/kernel_ops.cpp's chunked linear cross-entropy
  // on ln_f's output. Forward: the log-sum-exp and row losses (N floats each), the
  // running max, sum and target logit (N each, gone when the blocks are done), one
  // rows x vocab block of logits at a time; then the count of rows kept -- a bool
  // per row, summed to an int64 scalar and cast to a float one, the first two gone
  // with the statement -- and the loss, a float scalar divided by the count (the sum
  // a temporary). Saved: ln_f's output, the log-sum-exp and the count (the weight and
  // the targets are not activations). Backward: grad / count (a scalar, gone after
  // .item()), the hidden state's zeroed gradient, one block of logits at a time, and
  // the weight's gradient added into wte.grad (Note [Gradients into .grad]).
  Id chunked_head(Id x) {
    const Id h = layer_norm(x);
    const int64_t rows = std::min(kChunkedLossRows, N), block = std::min(kChunkedLossVocabBlock, V);
    const Id lse = t.make(kFloatBytes * N), row_loss = t.make(kFloatBytes * N);
    const Id running_max = t.make(kFloatBytes * N), running_sum = t.make(kFloatBytes * N);
    const Id target_logit = t.make(kFloatBytes * N);
    t.scratch(kFloatBytes * rows * block);
    for (Id id : {running_max, running_sum, target_logit}) t.drop(id);
    const Id kept = t.make(kBoolBytes * N), kept_sum = t.make(kInt64Bytes), count = t.make(kFloatBytes);
    t.drop(kept_sum);
    t.drop(kept);
    const Id loss_sum = t.make(kFloatBytes), loss = t.make(kFloatBytes);
    t.drop(loss_sum);
    const int64_t nc = N * C;
    t.node({h}, {loss}, {h, lse, count}, [nc, rows, block](Step& s) {
      s.free(s.make(kFloatBytes));  // grad / count, read by .item()
      const Grad dh = s.make(kFloatBytes * nc);
      s.scratch(kFloatBytes * rows * block);
      s.give(0, dh);
    });
    t.drop(row_loss);
    t.drop(lse);
    t.drop(count);
    t.drop(h);
    return loss;
  }

 private:
  Tape& t;
  const gpt2::Gpt2Config& c;
  const int threads;
  const int64_t N, C, H, T, V, BH, BHTT;
};

// One stage of stage_layout() replayed. input_bytes is x_i, the whole of a_i.
AnalyticStage replay(const StageLayout& stage, int64_t input_bytes, const gpt2::Gpt2Config& c,
                     const gpt2::Gpt2Workload& w, int threads) {
  const int64_t C = c.n_embd;
  auto run = [&](Tape& tape) {
    Gpt2Ops ops(tape, c, w, threads);
    switch (stage.kind) {
      case StageKind::Embed: return ops.embed();
      case StageKind::Block: return ops.block(Tape::kInput);
      case StageKind::AttentionHalf: return ops.attention_half(Tape::kInput);
      case StageKind::MlpHalf: return ops.mlp_half(Tape::kInput);
      // Note [Operator stages]: the tape's input is the operator's own input; the
      // residual beside it is not on the tape, except where the add reads it, nor is
      // qkv beside the probabilities, except where attn.mix reads it.
      case StageKind::Ln1:
      case StageKind::Ln2: return ops.layer_norm(Tape::kInput);
      case StageKind::AttentionQkv: return ops.attention_qkv(Tape::kInput);
      case StageKind::AttentionCore: return ops.attention_core(Tape::kInput);
      case StageKind::AttentionSoftmax: return ops.attention_softmax(Tape::kInput);
      case StageKind::AttentionMix: return ops.attention_mix(Tape::kInput, Tape::kBeside);
      case StageKind::AttentionProj: return ops.projection_residual(Tape::kInput, C, Tape::kBeside);
      case StageKind::MlpFc: return ops.mlp_fc(Tape::kInput);
      case StageKind::MlpGelu: return ops.mlp_gelu(Tape::kInput);
      case StageKind::MlpProj: return ops.projection_residual(Tape::kInput, 4 * C, Tape::kBeside);
      case StageKind::Head: return ops.head(Tape::kInput);
    }
    return Tape::kInput;
  };
  Tape grad(true), nograd(false);
  const Tape::Id out = run(grad);
  run(nograd);
  AnalyticStage s;
  s.name = stage.name;
  // The residual passed through is part of the output, and of ā_{i+1} with it.
  s.carried_bytes = kFloatBytes * w.batch * w.seq_len * carried_floats_per_token(stage.kind, c);
  s.out_bytes = grad.bytes(out) + s.carried_bytes;
  s.saved_bytes = grad.live_bytes() + s.carried_bytes;
  s.fwd_tmp_grad_bytes = grad.peak_bytes() - grad.live_bytes();
  s.fwd_tmp_nograd_bytes = nograd.peak_bytes() - nograd.live_bytes();
  // Note [Stage byte accounting] in profiler.h: the peak less the new part of d_i --
  // x_i, even for the token ids, which get no gradient, less the residual gradient it
  // shares with d_{i+1} (docs/formats.md, "Carried bytes"); negative when the backward
  // frees saved tensors first (Note [A backward may peak below its gradient] in
  // solver/chain/chain.h).
  s.bwd_tmp_bytes = grad.backward_peak(out) - (input_bytes - s.carried_bytes);
  return s;
}

}  // namespace

std::vector<AnalyticStage> gpt2_analytic_stages(const gpt2::Gpt2Config& c, const gpt2::Gpt2Workload& w,
                                                int threads) {
  if (std::string e = gpt2::validate(c, w); !e.empty()) throw std::invalid_argument("gpt2: " + e);
  std::vector<AnalyticStage> stages;
  int64_t input_bytes = gpt2_analytic_input_bytes(w);
  for (const StageLayout& stage : stage_layout(c)) {
    stages.push_back(replay(stage, input_bytes, c, w, threads));
    input_bytes = stages.back().out_bytes;
  }
  return stages;
}

int64_t gpt2_analytic_input_bytes(const gpt2::Gpt2Workload& w) { return 8 * w.batch * w.seq_len; }

int64_t gpt2_analytic_parameter_bytes(const gpt2::Gpt2Config& c) {
  // Every stage's home parameters (the same sum at any granularity): wte once -- the
  // head's read of it is not a home -- wpe, the blocks and ln_f.
  int64_t floats = 0;
  for (const StageLayout& stage : stage_layout(c)) floats += home_parameter_count(stage.kind, c);
  return kFloatBytes * floats;
}

}  // namespace memopt::gpt2
