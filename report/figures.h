// figures.h: a report folder's figures -- the script that draws them from the
// report's JSON, and which of the figures a README can show, each with its caption.
#pragma once

#include <string>
#include <vector>

namespace memopt::report {

struct Figure {
  std::string file;     // a name in the report folder, e.g. "stage_map.png"
  std::string caption;  // what the figure shows, under it in the README
};

// The figures of `known` that exist in `dir`, in the order given.
std::vector<Figure> existing_figures(const std::string& dir, const std::vector<Figure>& known);

// "## Figures" and each figure, image then caption, for a README; "" without figures.
std::string figures_markdown(const std::vector<Figure>& figures);

// The figure script: `python plot_script json --out dir`; returns the command line,
// and runs it when `python` exists. `ran` tells whether it succeeded.
std::string run_plot_script(const std::string& python, const std::string& script, const std::string& json_path,
                            const std::string& out_dir, bool* ran);

}  // namespace memopt::report
