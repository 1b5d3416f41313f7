// Column-aligned text tables (see text_table.h).
#include "common/bench/text_table.h"

#include <algorithm>
#include <cstddef>

namespace lab::bench {

std::string TextTable::render(const std::string& indent) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);  // an empty last cell leaves padding behind
    out += line + "\n";
  }
  return out;
}

}  // namespace lab::bench
