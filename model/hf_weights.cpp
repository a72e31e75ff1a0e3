// hf_weights.cpp: the safetensors reader/writer and the Hugging Face GPT-2 loader.
#include "model/hf_weights.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "solver/io/atomic_file.h"

namespace memopt::model {
namespace {

// The safetensors dtypes memopt reads, in one table.
struct DtypeInfo { const char* word; at::ScalarType type; int64_t size_bytes; };
constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2},  {"BF16", at::kBFloat16, 2},
    {"I64", at::kLong, 8},   {"I32", at::kInt, 4},   {"I16", at::kShort, 2}, {"I8", at::kChar, 1},
    {"U8", at::kByte, 1},    {"BOOL", at::kBool, 1},
};

std::optional<DtypeInfo> dtype_from_word(const std::string& word) {
  for (const DtypeInfo& d : kDtypes)
    if (word == d.word) return d;
  return std::nullopt;
}

std::optional<DtypeInfo> dtype_from_type(at::ScalarType type) {
  for (const DtypeInfo& d : kDtypes)
    if (type == d.type) return d;
  return std::nullopt;
}

std::string shape_text(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw std::runtime_error(path_ + ": cannot open (" + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const int64_t file_bytes = in.tellg();
  in.seekg(0);
  unsigned char len_le[8];
  if (file_bytes < 8 || !in.read(reinterpret_cast<char*>(len_le), 8))
    throw std::runtime_error(path_ + ": too short for a safetensors file (" + std::to_string(file_bytes) + " bytes)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | len_le[i];
  if (header_bytes > static_cast<uint64_t>(file_bytes - 8))
    throw std::runtime_error(path_ + ": header length " + std::to_string(header_bytes) +
                             " runs past the end of the file; not a safetensors file?");
  std::string header(header_bytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_bytes));
  data_offset_bytes_ = 8 + static_cast<int64_t>(header_bytes);
  const int64_t data_bytes = file_bytes - data_offset_bytes_;

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path_ + ": header is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw std::runtime_error(path_ + ": header is not a JSON object");
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path_ + ": tensor '" + name + "': ";
    try {
      Entry e;
      e.dtype = v.at("dtype").get<std::string>();
      e.shape = v.at("shape").get<std::vector<int64_t>>();
      const auto offsets = v.at("data_offsets").get<std::vector<int64_t>>();
      if (offsets.size() != 2) throw std::runtime_error("data_offsets must hold 2 numbers");
      e.begin_bytes = offsets[0];
      e.end_bytes = offsets[1];
      const auto dtype = dtype_from_word(e.dtype);
      if (!dtype) throw std::runtime_error("unsupported dtype " + e.dtype);
      int64_t numel = 1;
      for (int64_t d : e.shape) {
        if (d < 0) throw std::runtime_error("negative dimension in shape " + shape_text(e.shape));
        numel *= d;
      }
      if (e.begin_bytes < 0 || e.end_bytes < e.begin_bytes || e.end_bytes > data_bytes)
        throw std::runtime_error("data_offsets [" + std::to_string(e.begin_bytes) + ", " +
                                 std::to_string(e.end_bytes) + "] fall outside the " +
                                 std::to_string(data_bytes) + "-byte data section (truncated file?)");
      if (e.end_bytes - e.begin_bytes != numel * dtype->size_bytes)
        throw std::runtime_error("holds " + std::to_string(e.end_bytes - e.begin_bytes) + " bytes but " + e.dtype +
                                 " " + shape_text(e.shape) + " needs " + std::to_string(numel * dtype->size_bytes));
      entries_.emplace(name, std::move(e));
    } catch (const nlohmann::json::exception& ex) {
      throw std::runtime_error(where + "malformed header entry: " + ex.what());
    } catch (const std::runtime_error& ex) {
      throw std::runtime_error(where + ex.what());
    }
  }
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) throw std::runtime_error(path_ + ": no tensor named '" + name + "'");
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

at::Tensor SafetensorsFile::read(const std::string& name) const {
  const Entry& e = entry(name);
  at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(dtype_from_word(e.dtype)->type));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(data_offset_bytes_ + e.begin_bytes);
  if (!in.read(static_cast<char*>(t.data_ptr()), e.end_bytes - e.begin_bytes))
    throw std::runtime_error(path_ + ": tensor '" + name + "': read failed (truncated file?)");
  return t;
}

std::map<std::string, at::Tensor> read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  std::map<std::string, at::Tensor> out;
  for (const std::string& name : file.names()) out.emplace(name, file.read(name));
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> data;
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const auto dtype = dtype_from_type(t.scalar_type());
    if (!dtype) throw std::invalid_argument(path + ": tensor '" + name + "': dtype has no safetensors word");
    at::Tensor c = t.cpu().contiguous();
    const int64_t bytes = static_cast<int64_t>(c.nbytes());
    header[name] = {{"dtype", dtype->word}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  const std::string text = header.dump();
  uint64_t n = text.size();
  char len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::vector<std::string_view> parts{std::string_view(len_le, 8), text};
  for (const at::Tensor& c : data) parts.emplace_back(static_cast<const char*>(c.data_ptr()), c.nbytes());
  solver::write_file_atomic(path, parts);
}

gpt2::Gpt2Config read_hf_gpt2_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open; --hf-dir needs a directory holding config.json and model.safetensors");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& field, const std::string& what) -> std::runtime_error {
    return std::runtime_error(path + ": " + field + ": " + what);
  };
  auto integer = [&](const char* key, std::optional<const char*> alias = std::nullopt) -> int64_t {
    const char* k = j.contains(key) || !alias ? key : *alias;
    if (!j.contains(k)) throw fail(key, "missing");
    if (!j.at(k).is_number_integer()) throw fail(k, "expected an integer, got " + j.at(k).dump());
    return j.at(k).get<int64_t>();
  };
  auto number_or = [&](const char* key, double fallback) -> double {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    if (!j.at(key).is_number()) throw fail(key, "expected a number, got " + j.at(key).dump());
    return j.at(key).get<double>();
  };
  auto flag_or = [&](const char* key, bool fallback) -> bool {
    return j.contains(key) && j.at(key).is_boolean() ? j.at(key).get<bool>() : fallback;
  };

  if (j.contains("model_type") && j.at("model_type") != "gpt2")
    throw fail("model_type", j.at("model_type").dump() + " is not gpt2");
  gpt2::Gpt2Config c;
  c.n_layer = integer("n_layer");
  c.n_embd = integer("n_embd");
  c.n_head = integer("n_head");
  c.vocab_size = integer("vocab_size");
  c.n_positions = integer("n_positions", "n_ctx");
  c.embd_pdrop = number_or("embd_pdrop", 0.1);
  c.attn_pdrop = number_or("attn_pdrop", 0.1);
  c.resid_pdrop = number_or("resid_pdrop", 0.1);
  c.layer_norm_epsilon = number_or("layer_norm_epsilon", 1e-5);
  const std::string act = j.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw fail("activation_function", "'" + act + "' is not supported; memopt's GPT-2 uses the tanh GELU (gelu_new)");
  if (j.contains("n_inner") && !j.at("n_inner").is_null() && j.at("n_inner") != 4 * c.n_embd)
    throw fail("n_inner", j.at("n_inner").dump() + " is not 4 * n_embd; memopt's GPT-2 has a 4x MLP");
  if (!flag_or("scale_attn_weights", true)) throw fail("scale_attn_weights", "false is not supported");
  if (flag_or("scale_attn_by_inverse_layer_idx", false))
    throw fail("scale_attn_by_inverse_layer_idx", "true is not supported");
  if (!flag_or("tie_word_embeddings", true)) throw fail("tie_word_embeddings", "an untied lm_head is not supported");
  if (std::string e = gpt2::validate(c); !e.empty()) throw std::runtime_error(path + ": " + e);
  return c;
}

void load_hf_gpt2_weights(torch::nn::Module& gpt2, const std::string& dir) {
  const SafetensorsFile file(dir + "/model.safetensors");
  at::NoGradGuard no_grad;
  for (const auto& item : gpt2.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor param = item.value();
    const std::string stored = file.contains("transformer." + name) ? "transformer." + name : name;
    if (!file.contains(stored))
      throw std::runtime_error(file.path() + ": tensor '" + name + "' (or 'transformer." + name +
                               "') is missing; is this a GPT-2 checkpoint with the config.json beside it?");
    // Hugging Face's Conv1D computes x @ W + b with W stored [in, out].
    const bool conv1d = name.ends_with(".c_attn.weight") || name.ends_with(".c_proj.weight") ||
                        name.ends_with(".c_fc.weight");
    at::Tensor value = file.read(stored);
    if (conv1d && value.dim() == 2) value = value.t();
    if (value.sizes() != param.sizes()) {
      const auto expected = conv1d ? param.t().sizes().vec() : param.sizes().vec();
      const auto found = file.entry(stored).shape;
      throw std::runtime_error(file.path() + ": tensor '" + stored + "' has shape " + shape_text(found) +
                               " but config.json's dimensions need " + shape_text(expected) +
                               "; do config.json and model.safetensors belong together?");
    }
    if (!at::isFloatingType(value.scalar_type()))
      throw std::runtime_error(file.path() + ": tensor '" + stored + "' has non-float dtype " + file.entry(stored).dtype);
    param.copy_(value);  // converts the dtype
  }
}

}  // namespace memopt::model
