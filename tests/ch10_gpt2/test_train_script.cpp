// scripts/train.sh builds every program the README's "Programs" table lists under build/bin/, so the table
// never names a program that the quick start did not build.
#include <gtest/gtest.h>

#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "common/io/files.h"

namespace lab {
namespace {

// The programs of the README's table: the first cell of each row, minus the scripts.
std::set<std::string> programs_in_readme() {
  const std::string readme = read_file(std::string(LAB_SOURCE_DIR) + "/README.md");
  const size_t table = readme.find("## Programs");
  EXPECT_NE(table, std::string::npos);
  std::istringstream in(readme.substr(table, readme.find("\n## ", table + 1) - table));
  std::set<std::string> programs;
  const std::regex row(R"(^\| `([A-Za-z0-9_]+)` \|)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, row)) programs.insert(m[1].str());
  return programs;
}

TEST(TrainScript, BuildsEveryProgramOfTheReadmeTable) {
  const std::set<std::string> programs = programs_in_readme();
  EXPECT_EQ(programs, (std::set<std::string>{"gpt2_train", "gpt2_sample", "gpt2_step_bench", "gpt2_tokenize",
                                             "ch05_loader_bench", "bench_diff"}));
  const std::string script = read_file(std::string(LAB_SOURCE_DIR) + "/scripts/train.sh");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(script, m, std::regex(R"(--target ([^\n]+))"))) << script;
  std::istringstream targets(m[1].str());
  const std::set<std::string> built{std::istream_iterator<std::string>(targets), std::istream_iterator<std::string>()};
  for (const std::string& program : programs) EXPECT_TRUE(built.count(program)) << program << " is not built";
}

}  // namespace
}  // namespace lab
