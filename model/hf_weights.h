// hf_weights.h: reading safetensors files and loading a local Hugging Face GPT-2
// directory (config.json + model.safetensors) into memopt's GPT-2. No hub access.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "gpt2/config.h"

namespace torch::nn {
class Module;
}

namespace memopt::model {

// A safetensors file: 8-byte little-endian header length, a JSON header mapping each
// name to {dtype, shape, data_offsets}, then the raw little-endian data. The
// constructor reads and checks the header only; read() loads one tensor.
class SafetensorsFile {
 public:
  struct Entry {
    std::string dtype;  // "F32", "BF16", "I64", ...
    std::vector<int64_t> shape;
    int64_t begin_bytes = 0, end_bytes = 0;  // offsets into the data section
  };

  // Throws std::runtime_error "<path>: <what is wrong>" for unreadable or malformed files.
  explicit SafetensorsFile(std::string path);

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const Entry& entry(const std::string& name) const;
  std::vector<std::string> names() const;
  at::Tensor read(const std::string& name) const;  // a CPU tensor in the stored dtype

 private:
  std::string path_;
  int64_t data_offset_bytes_ = 0;
  std::map<std::string, Entry> entries_;
};

// Every tensor of a file, by name.
std::map<std::string, at::Tensor> read_safetensors(const std::string& path);
// Writes contiguous CPU tensors (F32/F64/F16/BF16/I64/I32/U8/BOOL); for tests and tools.
void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors);

// GPT-2's dimensions, dropout and epsilon from <dir>/config.json. Throws naming the
// file and the field when it is not a GPT-2 memopt can run (another activation, an
// n_inner other than 4 * n_embd, unscaled or layer-scaled attention, untied head).
gpt2::Gpt2Config read_hf_gpt2_config(const std::string& dir);

// Copies <dir>/model.safetensors into `gpt2` (a Gpt2Impl, by its parameter names).
// Names may carry the "transformer." prefix or not; Conv1D weights (c_attn, c_proj,
// c_fc) are stored [in, out] and are transposed into nn::Linear's [out, in]; the
// tied lm_head and the attention mask buffers are ignored; any dtype is converted.
// Throws "<file>: tensor '<name>': ..." for a missing tensor or a wrong shape.
void load_hf_gpt2_weights(torch::nn::Module& gpt2, const std::string& dir);

}  // namespace memopt::model
