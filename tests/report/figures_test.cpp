// figures_test.cpp: a report folder lists only the figures whose files exist, in the
// order given, each shown in the README above its caption; the trade-off and fit
// reports caption every figure their scripts draw.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "report/figures.h"
#include "report/fit_chart.h"
#include "report/tradeoff.h"

namespace memopt::report {
namespace {

TEST(Figures, OnlyThoseThatExistInTheGivenOrder) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "memopt_figures_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "b.png") << "png";
  std::ofstream(dir / "c.png") << "png";
  const std::vector<Figure> found =
      existing_figures(dir.string(), {{"a.png", "A"}, {"c.png", "C"}, {"b.png", "B"}});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].file, "c.png");
  EXPECT_EQ(found[0].caption, "C");
  EXPECT_EQ(found[1].file, "b.png");
  EXPECT_EQ(figures_markdown(found), "## Figures\n\n![C](c.png)\n\nC\n\n![B](b.png)\n\nB\n\n");
  EXPECT_EQ(figures_markdown({}), "");
  std::filesystem::remove_all(dir);
}

TEST(Figures, ReportsCaptionEveryFigureTheirScriptsDraw) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "memopt_report_figures_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(tradeoff_figures(dir.string()).empty());
  EXPECT_TRUE(fit_figures(dir.string()).empty());
  // The PNG files tools/plot_tradeoff.py and tools/plot_fit.py write.
  for (const char* file : {"overhead_vs_budget.png", "stage_map.png", "predicted_vs_measured.png", "fit_chart.png"})
    std::ofstream(dir / file) << "png";
  const std::vector<Figure> tradeoff = tradeoff_figures(dir.string());
  ASSERT_EQ(tradeoff.size(), 3u);
  EXPECT_EQ(tradeoff[0].file, "overhead_vs_budget.png");
  EXPECT_EQ(tradeoff[1].file, "stage_map.png");
  EXPECT_EQ(tradeoff[2].file, "predicted_vs_measured.png");
  const std::vector<Figure> fit = fit_figures(dir.string());
  ASSERT_EQ(fit.size(), 1u);
  EXPECT_EQ(fit[0].file, "fit_chart.png");
  for (const Figure& f : tradeoff) EXPECT_GT(f.caption.size(), 40u) << f.file;
  EXPECT_GT(fit[0].caption.size(), 40u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memopt::report
