// figures.cpp: which figures a report folder holds, and drawing them.
#include "report/figures.h"

#include <cstdlib>
#include <filesystem>

#include "common/command_line.h"

namespace memopt::report {

std::vector<Figure> existing_figures(const std::string& dir, const std::vector<Figure>& known) {
  std::vector<Figure> out;
  for (const Figure& f : known)
    if (std::filesystem::exists(std::filesystem::path(dir) / f.file)) out.push_back(f);
  return out;
}

std::string figures_markdown(const std::vector<Figure>& figures) {
  if (figures.empty()) return "";
  std::string out = "## Figures\n\n";
  for (const Figure& f : figures) out += "![" + f.caption + "](" + f.file + ")\n\n" + f.caption + "\n\n";
  return out;
}

std::string run_plot_script(const std::string& python, const std::string& script, const std::string& json_path,
                            const std::string& out_dir, bool* ran) {
  using common::shell_quote;
  const std::string cmd =
      shell_quote(python) + " " + shell_quote(script) + " " + shell_quote(json_path) + " --out " + shell_quote(out_dir);
  *ran = false;
  if (std::filesystem::exists(python) && std::filesystem::exists(script)) *ran = std::system(cmd.c_str()) == 0;
  return cmd;
}

}  // namespace memopt::report
