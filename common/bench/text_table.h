// A table of text cells, each column padded to its widest cell: the layout of every report the benchmarks
// print (bench_diff, kernel labs, staircases).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lab::bench {

class TextTable {
 public:
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Every row on its own line, after `indent`, columns two spaces apart; trailing spaces trimmed.
  std::string render(const std::string& indent) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace lab::bench
