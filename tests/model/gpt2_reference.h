// gpt2_reference.h: the Hugging Face reference directory the runtime tests share --
// made once per build tree by tests/python/gpt2_reference.py and reused by every
// test process (ctest runs each test in its own).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace memopt::model::testing {

// The small model the reference holds; the C++ side reads the dims from config.json.
inline constexpr const char* kReferenceArgs =
    "--n-layer 2 --n-embd 64 --n-head 4 --vocab 96 --n-positions 32 --batch 2 --seq 24 --seed 7";

struct Reference {
  std::string dir;    // config.json, model.safetensors, reference.safetensors
  std::string error;  // why there is none, when dir is empty
};

// Generates into a private directory and renames it into place, so parallel test
// processes never see half a reference; the loser of the race uses the winner's.
inline Reference gpt2_reference() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(MEMOPT_BINARY_DIR) / "test_data" / "gpt2_reference";
  const fs::path script = fs::path(MEMOPT_SOURCE_DIR) / "tests" / "python" / "gpt2_reference.py";
  std::error_code ec;
  const auto fresh = [&] {
    std::error_code e;
    return fs::exists(dir / "reference.safetensors") &&
           fs::last_write_time(dir / "reference.safetensors", e) >= fs::last_write_time(script, e);
  };
  if (fresh()) return {dir.string(), ""};
  if (!fs::exists(MEMOPT_PYTHON)) return {"", std::string("no Python at ") + MEMOPT_PYTHON + "; run scripts/setup.sh"};
  const fs::path tmp = dir.string() + ".tmp." + std::to_string(::getpid());
  fs::create_directories(dir.parent_path());
  const std::string command = std::string("'") + MEMOPT_PYTHON + "' '" + script.string() + "' '" + tmp.string() +
                              "' " + kReferenceArgs + " > '" + tmp.string() + ".log' 2>&1";
  if (std::system(command.c_str()) != 0)
    return {"", "the reference script failed; see " + tmp.string() + ".log (command: " + command + ")"};
  fs::remove(tmp.string() + ".log", ec);
  // Never delete a fresh reference: another test process may be reading it. A rename
  // onto an existing directory fails, and then either another process won the race
  // (use its copy) or the existing one is stale (replace it).
  fs::rename(tmp, dir, ec);
  if (!ec) return {dir.string(), ""};
  if (!fresh()) {
    fs::remove_all(dir, ec);
    fs::rename(tmp, dir, ec);
  }
  fs::remove_all(tmp, ec);
  return {dir.string(), ""};
}

}  // namespace memopt::model::testing
