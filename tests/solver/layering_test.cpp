// layering_test.cpp: solver/'s folders are layers (docs/solver.md, "Where the code
// is"): a file includes solver headers only from its own folder and the folders that
// folder may use, so the library has no loop; and every source sits in one of them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

// Each folder and the folders it may include from (itself included).
const std::map<std::string, std::set<std::string>>& may_use() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"chain", {"chain"}},
      {"io", {"chain", "io"}},
      {"dp", {"chain", "dp"}},
      {"search", {"chain", "dp", "search"}},
      {"distributed", {"chain", "dp", "search", "distributed"}},
  };
  return table;
}

TEST(SolverLayers, EveryIncludeGoesToAFolderItsFolderMayUse) {
  const fs::path root = fs::path(MEMOPT_SOURCE_DIR) / "solver";
  const std::regex include(R"re(#include\s+"solver/([a-z_]+)/[a-z_]+\.h")re");
  int files = 0, includes = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    const std::string folder = fs::relative(e.path(), root).begin()->string();
    ASSERT_TRUE(may_use().count(folder)) << e.path() << " is not in one of solver/'s folders";
    ++files;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      ++includes;
      EXPECT_TRUE(may_use().at(folder).count(m[1].str()))
          << e.path() << " (in " << folder << "/) includes from " << m[1].str() << "/: " << line;
    }
  }
  // The scan saw the library: each of its files, most of them including another.
  EXPECT_GT(files, 50);
  EXPECT_GT(includes, 50);
}

}  // namespace
