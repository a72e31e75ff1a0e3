// config.cpp: the enumeration tables' lookups, the presets, validation and the
// profile's "model" object.
#include "gpt2/config.h"

#include <stdexcept>

namespace memopt::gpt2 {

namespace {

// Each enumeration's lookups, in its one table (config.h).
template <typename Row, size_t K, typename E>
const char* word_in(const Row (&table)[K], E value) {
  for (const Row& row : table)
    if (row.value == value) return row.word;
  return "?";
}

template <typename Row, size_t K>
auto value_in(const Row (&table)[K], const std::string& word) -> std::optional<decltype(table[0].value)> {
  for (const Row& row : table)
    if (word == row.word) return row.value;
  return std::nullopt;
}

}  // namespace

const char* granularity_word(Granularity g) { return word_in(kGranularities, g); }
std::optional<Granularity> granularity_from_word(const std::string& word) { return value_in(kGranularities, word); }
const char* attention_word(Attention a) { return word_in(kAttentions, a); }
std::optional<Attention> attention_from_word(const std::string& word) { return value_in(kAttentions, word); }
const char* kernels_word(Kernels k) { return word_in(kKernelChoices, k); }
std::optional<Kernels> kernels_from_word(const std::string& word) { return value_in(kKernelChoices, word); }
const char* loss_word(Loss l) { return word_in(kLosses, l); }
std::optional<Loss> loss_from_word(const std::string& word) { return value_in(kLosses, word); }

std::optional<Gpt2Preset> gpt2_preset(const std::string& name) {
  auto make = [&](int64_t n_layer, int64_t n_embd, int64_t n_head, int64_t vocab, int64_t n_positions,
                  int64_t batch, int64_t seq_len) {
    Gpt2Preset p{name, {}, {}};
    p.config.n_layer = n_layer;
    p.config.n_embd = n_embd;
    p.config.n_head = n_head;
    p.config.vocab_size = vocab;
    p.config.n_positions = n_positions;
    p.workload = {batch, seq_len};
    return p;
  };
  std::optional<Gpt2Preset> p;
  if (name == "tiny") p = make(4, 128, 4, 1024, 128, 4, 128);  // Note [The tiny preset]
  // The published sizes; B = 8, T = 1024 as in the bundled example profile.
  else if (name == "small") p = make(12, 768, 12, 50257, 1024, 8, 1024);
  else if (name == "medium") p = make(24, 1024, 16, 50257, 1024, 8, 1024);
  else if (name == "large") p = make(36, 1280, 20, 50257, 1024, 8, 1024);
  else if (name == "xl") p = make(48, 1600, 25, 50257, 1024, 8, 1024);
  return p;
}

std::string validate(const Gpt2Config& c) {
  auto positive = [](int64_t v, const char* what) -> std::string {
    return v > 0 ? "" : std::string(what) + " must be positive, got " + std::to_string(v);
  };
  for (const std::string& e : {positive(c.n_layer, "n_layer"), positive(c.n_embd, "n_embd"),
                               positive(c.n_head, "n_head"), positive(c.vocab_size, "vocab"),
                               positive(c.n_positions, "n_positions")})
    if (!e.empty()) return e;
  if (c.n_embd % c.n_head != 0)
    return "n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head) +
           "; pick n_embd as a multiple of n_head (GPT-2 uses head size 64)";
  for (double p : {c.embd_pdrop, c.attn_pdrop, c.resid_pdrop})
    if (!(p >= 0.0 && p < 1.0)) return "dropout " + std::to_string(p) + " is outside [0, 1)";
  if (!(c.layer_norm_epsilon > 0.0)) return "layer_norm_epsilon must be positive";
  return "";
}

std::string validate(const Gpt2Config& c, const Gpt2Workload& w) {
  if (std::string e = validate(c); !e.empty()) return e;
  if (w.batch <= 0) return "batch must be positive, got " + std::to_string(w.batch);
  if (w.seq_len <= 0) return "seq_len must be positive, got " + std::to_string(w.seq_len);
  if (w.seq_len > c.n_positions)
    return "seq_len " + std::to_string(w.seq_len) + " exceeds the model's n_positions " +
           std::to_string(c.n_positions) + "; raise n_positions or shorten the sequence";
  return "";
}

nlohmann::ordered_json gpt2_spec_to_json(const Gpt2Spec& s) {
  const Gpt2Config& c = s.config;
  nlohmann::ordered_json j = {
      {"name", "gpt2"},
      {"n_layer", c.n_layer},
      {"n_embd", c.n_embd},
      {"n_head", c.n_head},
      {"vocab", c.vocab_size},
      {"seq_len", s.workload.seq_len},
      {"batch", s.workload.batch},
      {"dtype", "float32"},
      {"attention", attention_word(c.attention)},
  };
  if (c.embd_pdrop == c.attn_pdrop && c.attn_pdrop == c.resid_pdrop)
    j["dropout"] = c.embd_pdrop;
  else
    j["dropout"] = {{"attn", c.attn_pdrop}, {"embd", c.embd_pdrop}, {"resid", c.resid_pdrop}};
  j["granularity"] = granularity_word(c.granularity);
  if (!s.hf_dir.empty()) j["hf_dir"] = s.hf_dir;
  j["kernels"] = kernels_word(c.kernels);
  j["layer_norm_epsilon"] = c.layer_norm_epsilon;
  j["loss"] = loss_word(c.loss);
  j["n_positions"] = c.n_positions;
  if (!s.preset.empty()) j["preset"] = s.preset;
  j["seed"] = s.seed;
  return j;
}

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) throw std::invalid_argument(std::string("model/") + key + ": missing");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("model/") + key + ": wrong type (" + j.at(key).dump() + ")");
  }
}

// An enumeration's field, when present: its word in `table`, or an error naming the
// field, the word and the choices.
template <typename Row, size_t K, typename E>
void read_choice(const nlohmann::json& j, const char* key, const Row (&table)[K], E& target) {
  if (!j.contains(key)) return;
  const std::string word = field<std::string>(j, key);
  const auto value = value_in(table, word);
  if (!value) throw std::invalid_argument(std::string("model/") + key + ": '" + word + "' is not " + words_of(table));
  target = *value;
}

}  // namespace

Gpt2Spec gpt2_spec_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("model: not an object");
  if (field<std::string>(j, "name") != "gpt2")
    throw std::invalid_argument("model/name: '" + j.at("name").get<std::string>() + "' is not gpt2");
  if (j.contains("dtype") && field<std::string>(j, "dtype") != "float32")
    throw std::invalid_argument("model/dtype: only float32 is supported");
  Gpt2Spec s;
  Gpt2Config& c = s.config;
  c.n_layer = field<int64_t>(j, "n_layer");
  c.n_embd = field<int64_t>(j, "n_embd");
  c.n_head = field<int64_t>(j, "n_head");
  c.vocab_size = field<int64_t>(j, "vocab");
  s.workload.seq_len = field<int64_t>(j, "seq_len");
  s.workload.batch = field<int64_t>(j, "batch");
  c.n_positions = j.contains("n_positions") ? field<int64_t>(j, "n_positions") : s.workload.seq_len;
  if (j.contains("layer_norm_epsilon")) c.layer_norm_epsilon = field<double>(j, "layer_norm_epsilon");
  // Note [Kernel choice], Note [Loss choice]: a profile from before those fields ran
  // ATen's kernels and loss.
  c.kernels = Kernels::Aten;
  c.loss = Loss::Aten;
  read_choice(j, "granularity", kGranularities, c.granularity);
  read_choice(j, "attention", kAttentions, c.attention);
  read_choice(j, "kernels", kKernelChoices, c.kernels);
  read_choice(j, "loss", kLosses, c.loss);
  if (j.contains("dropout")) {
    const nlohmann::json& d = j.at("dropout");
    if (d.is_number()) {
      c.set_dropout(d.get<double>());
    } else if (d.is_object() && d.contains("embd") && d.contains("attn") && d.contains("resid")) {
      c.embd_pdrop = d.at("embd").get<double>();
      c.attn_pdrop = d.at("attn").get<double>();
      c.resid_pdrop = d.at("resid").get<double>();
    } else {
      throw std::invalid_argument("model/dropout: expected a number or {embd, attn, resid}");
    }
  }
  if (j.contains("seed")) s.seed = field<uint64_t>(j, "seed");
  if (j.contains("hf_dir")) s.hf_dir = field<std::string>(j, "hf_dir");
  if (j.contains("preset")) s.preset = field<std::string>(j, "preset");
  if (std::string e = validate(c, s.workload); !e.empty()) throw std::invalid_argument("model: " + e);
  return s;
}

}  // namespace memopt::gpt2
