// figures.h: a report folder's figures -- the script that draws them from the
// report's JSON, and which of the figures a README can show, each with its caption.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// Where a report goes and how its figures are drawn.
struct ReportFolder {
  std::string dir;
  std::string json_name;                 // e.g. "tradeoff.json", written in dir
  std::string python, plot_script;       // run_plot_script's; the figures come from the JSON
  bool draw = true;                      // false: no figures are drawn (those already there still count)
  std::function<std::vector<Figure>(const std::string& dir)> figures_in;  // tradeoff_figures, fit_figures
};
// The one way a report folder is written: dir/json_name, then the figures, then
// dir/README.md = readme(the figures that exist). Returns those figures. When the
// figures could not be drawn, `undrawn` gets the command that draws them by hand.
std::vector<Figure> write_report_folder(const ReportFolder& folder, const nlohmann::ordered_json& json,
                                        const std::function<std::string(const std::vector<Figure>&)>& readme,
                                        const std::function<void(const std::string& command)>& undrawn);

}  // namespace memopt::report
