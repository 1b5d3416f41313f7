// The largest-micro-batch search and byte sizes (see max_batch.h).
#include "ch07_memory/max_batch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/core/error.h"
#include "common/util/rng.h"

namespace lab::ch07 {

int64_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(ErrorKind::InvalidArgument, "'", text, "' is not a size (examples: 8GiB, 512MiB, 8GB, 1000000)");
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024.0;
  if (unit == "GiB") scale = 1024.0 * 1024.0 * 1024.0;
  if (unit == "KB") scale = 1e3;
  if (unit == "MB") scale = 1e6;
  if (unit == "GB") scale = 1e9;
  LAB_CHECK(scale > 0 && value > 0 && std::isfinite(value), InvalidArgument, "'", text,
            "' is not a positive size (units: B, KiB, MiB, GiB, KB, MB, GB)");
  return static_cast<int64_t>(value * scale);
}

std::string MaxBatchSearch::str(int64_t budget) const {
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  std::string out;
  char line[200];
  for (const Trial& t : trials) {
    std::snprintf(line, sizeof line, "  micro-batch %6lld rows: peak %10.1f MiB %s\n", static_cast<long long>(t.rows),
                  mib(t.peak_bytes), t.peak_bytes <= budget ? "fits" : "over the budget");
    out += line;
  }
  if (rows == 0) {
    std::snprintf(line, sizeof line, "not even one row fits in %.1f MiB\n", mib(budget));
  } else {
    std::snprintf(
        line, sizeof line,
        "largest micro-batch: %lld rows, peak %.1f MiB of a %.1f MiB budget (%lld rows: %.1f MiB predicted)\n",
        static_cast<long long>(rows), mib(peak_bytes), mib(budget), static_cast<long long>(rows + 1),
        mib(next_predicted));
  }
  return out + line;
}

MaxBatchSearch find_max_batch(const std::function<int64_t(int64_t rows)>& peak_of, int64_t budget, int64_t max_rows) {
  LAB_CHECK(budget > 0 && max_rows >= 1, InvalidArgument, "find_max_batch: budget ", budget, ", max_rows ", max_rows);
  MaxBatchSearch s;
  auto measure = [&](int64_t rows) {
    const int64_t peak = peak_of(rows);
    s.trials.push_back({rows, peak});
    return peak;
  };
  const int64_t p1 = measure(1);
  if (p1 > budget) return s;
  s.rows = 1;
  s.peak_bytes = p1;
  if (max_rows == 1) return s;
  const int64_t p2 = measure(2);
  const int64_t per_row = std::max<int64_t>(p2 - p1, 1);
  if (p2 <= budget) {
    s.rows = 2;
    s.peak_bytes = p2;
  }
  // The prediction's largest fit, then down until a measurement fits (the prediction can be off by what does not
  // grow with the rows: a workspace chosen by shape, a cached block).
  int64_t rows = std::min(max_rows, 1 + (budget - p1) / per_row);
  while (rows > s.rows) {
    const int64_t peak = measure(rows);
    if (peak <= budget) {
      s.rows = rows;
      s.peak_bytes = peak;
      break;
    }
    --rows;
  }
  s.next_predicted = s.peak_bytes + per_row;
  return s;
}

MaxBatchSearch find_max_batch(TrainStep& step, int64_t seq, int64_t budget, int64_t max_rows) {
  GPT2& model = step.model();
  const Device device = model.device();
  const auto peak_of = [&](int64_t rows) {
    Rng rng(static_cast<uint64_t>(rows));
    std::vector<int32_t> ids(static_cast<size_t>(2 * rows * seq));
    for (auto& id : ids) id = static_cast<int32_t>(rng.below(model.config().vocab_size));
    const std::vector<int32_t> inputs(ids.begin(), ids.begin() + rows * seq),
        targets(ids.begin() + rows * seq, ids.end());
    const MicroBatch batch{Tensor::from_ints(inputs, {rows, seq}, device),
                           Tensor::from_ints(targets, {rows, seq}, device)};
    allocator_for(device).reset_peak();
    step.run([&] { return batch; }, 0.0);
    return memory_stats(device).peak_total;
  };
  return find_max_batch(peak_of, budget, max_rows);
}

}  // namespace lab::ch07
