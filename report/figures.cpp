// figures.cpp: which figures a report folder holds, and drawing them.
#include "report/figures.h"

#include <cstdlib>
#include <filesystem>

#include "common/command_line.h"
#include "solver/io/atomic_file.h"
#include "solver/io/json_printer.h"

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

std::vector<Figure> write_report_folder(const ReportFolder& folder, const nlohmann::ordered_json& json,
                                        const std::function<std::string(const std::vector<Figure>&)>& readme,
                                        const std::function<void(const std::string& command)>& undrawn) {
  std::filesystem::create_directories(folder.dir);
  const std::string json_path = (std::filesystem::path(folder.dir) / folder.json_name).string();
  solver::write_json_atomic(json_path, json);
  if (folder.draw) {
    bool drawn = false;
    const std::string command = run_plot_script(folder.python, folder.plot_script, json_path, folder.dir, &drawn);
    if (!drawn) undrawn(command);
  }
  const std::vector<Figure> figures = folder.figures_in(folder.dir);
  solver::write_file_atomic((std::filesystem::path(folder.dir) / "README.md").string(), readme(figures));
  return figures;
}

}  // namespace memopt::report
