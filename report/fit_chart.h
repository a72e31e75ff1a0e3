// fit_chart.h: will a model fit on a GPU, and how far does each solver move the limit?
// MODELED activation memory (gpt2/estimate.h) versus batch size and sequence
// length against the GPU's memory minus static bytes, and the largest batch (and
// sequence) each strategy fits -- behind `memopt estimate --fit-chart`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/estimate.h"
#include "report/figures.h"

namespace memopt::report {

struct FitOptions {
  gpt2::EstimateOptions estimate;  // the model, the GPU, the dtype; batch and seq are the sweeps' fixed values
  int64_t reserve_bytes = 0;           // CUDA context, workspaces, allocator slack: Note [GPU spec sources]
  double max_overhead = 0.10;          // "optimal at <= 10% modeled overhead"
  int slots = 500;
  int threads = 0;
  int64_t max_batch = 1024;
  int64_t max_seq = 16384;
};

// One (batch, seq) point: each strategy's modeled activation peak, and its overhead
// over store-all's time. "optimal<=10%" is the smallest budget at which the optimal
// solver stays within max_overhead; "optimal" its smallest feasible budget.
struct FitRow {
  int64_t batch = 0, seq = 0;
  std::map<std::string, int64_t> peak_bytes;
  std::map<std::string, double> overhead;
};

struct FitReport {
  std::string command;
  nlohmann::json model, device;
  std::string dtype;
  int64_t memory_bytes = 0, static_bytes = 0, reserve_bytes = 0, limit_bytes = 0;  // limit = memory - static - reserve
  double max_overhead = 0.10;
  std::vector<std::string> strategies;
  std::vector<FitRow> by_batch, by_seq;
  std::map<std::string, int64_t> largest_batch, largest_seq;  // 0: not even 1 / the smallest seq fits
};

// The strategies in order: store-all, sqrt, recompute-blocks, offload-all,
// recompute-all, optimal<=10%, optimal.
std::vector<std::string> fit_strategies();
FitReport fit_chart(const FitOptions& options, const std::function<void(const std::string&)>& progress = {});
nlohmann::ordered_json to_json(const FitReport& report);
// The figure tools/plot_fit.py draws into a fit report folder, when it exists in `dir`,
// with its caption.
std::vector<Figure> fit_figures(const std::string& dir);
// README.md for the fit report folder, showing `figures` with their captions.
std::string fit_readme(const FitReport& report, const std::vector<Figure>& figures);

}  // namespace memopt::report
