#include "ch10_gpt2/bench/gemm_floor.h"

#include <algorithm>
#include <cstdio>

#include "common/bench/timer.h"
#include "common/util/rng.h"

namespace lab {

GemmFloor::GemmFloor(const std::vector<ops::cpu::GemmShape>& calls) : calls_(calls.size()) {
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, bool>, int> counts;
  for (const auto& s : calls) counts[{s.trans_a, s.trans_b, s.M, s.N, s.K, s.accumulate}]++;
  size_t a = 0, b = 0, c = 0;
  for (const auto& [key, count] : counts) {
    const auto& [ta, tb, M, N, K, acc] = key;
    shapes_.push_back({ops::cpu::GemmShape{ta, tb, M, N, K, acc}, count, 0});
    a = std::max(a, static_cast<size_t>(M * K));
    b = std::max(b, static_cast<size_t>(K * N));
    c = std::max(c, static_cast<size_t>(M * N));
  }
  a_.resize(a);
  b_.resize(b);
  c_.resize(c);
  Rng rng(12345);
  for (std::vector<float>* buffer : {&a_, &b_, &c_})
    for (float& x : *buffer) x = rng.normal();
}

void GemmFloor::sample() {
  double total = 0;
  for (Shape& entry : shapes_) {
    const ops::cpu::GemmShape& s = entry.shape;
    const int64_t lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
    auto gemm = [&] {
      ops::cpu::sgemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, a_.data(), lda, b_.data(), ldb,
                      s.accumulate ? 1.0f : 0.0f, c_.data(), s.N);
    };
    gemm();
    bench::Timer timer;
    gemm();
    const double t = timer.seconds();
    entry.fastest = entry.fastest > 0 ? std::min(entry.fastest, t) : t;
    total += t * entry.calls;
  }
  totals_.push_back(total);
  ++samples_;
}

double GemmFloor::seconds() const {
  double floor = 0;
  for (const Shape& entry : shapes_) floor += entry.fastest * entry.calls;
  return floor;
}

double GemmFloor::flops() const {
  double flops = 0;
  for (const Shape& entry : shapes_) flops += entry.shape.flops() * entry.calls;
  return flops;
}

double GemmFloor::spread() const {
  if (totals_.empty()) return 0;
  const auto [low, high] = std::minmax_element(totals_.begin(), totals_.end());
  return *high / *low;
}

std::string GemmFloor::table() const {
  std::string out;
  char line[160];
  for (const Shape& entry : shapes_) {
    const ops::cpu::GemmShape& s = entry.shape;
    std::snprintf(line, sizeof line, "  %dx %c%c M=%-6lld N=%-6lld K=%-6lld %8.2f ms each, %6.1f GFLOP/s\n",
                  entry.calls, s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', static_cast<long long>(s.M),
                  static_cast<long long>(s.N), static_cast<long long>(s.K), entry.fastest * 1e3,
                  s.flops() / entry.fastest / 1e9);
    out += line;
  }
  return out;
}

}  // namespace lab
