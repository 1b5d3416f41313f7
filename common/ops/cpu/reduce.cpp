// CPU reference of common/ops/reduce.h.
//
// Fixed-size chunks are summed in float (vectorised), then the chunk sums are added in double in chunk
// order: the result does not depend on the thread count, which exact resume and reproducible runs need.
#include "common/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lab::ops::cpu {

namespace {

template <bool kSquare>
double chunked_sum(const Tensor& x) {
  constexpr int64_t kChunk = 4096;
  const float* p = x.data<float>();
  const int64_t n = x.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * kChunk, i1 = std::min(n, i0 + kChunk);
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; ++i) acc += kSquare ? p[i] * p[i] : p[i];
    partial[c] = acc;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

double sum_squares(const Tensor& x) {
  return chunked_sum<true>(x);
}
double sum(const Tensor& x) {
  return chunked_sum<false>(x);
}

void accumulate_sum(const Tensor& total, const Tensor& x, double weight) {
  float& t = total.data<float>()[0];
  t = static_cast<float>(static_cast<double>(t) + weight * chunked_sum<false>(x));
}

namespace {

// out[0] = sqrt(sum_squares) / loss_scale, out[1] = clip_scale of it: the numbers of every gradient norm.
void write_norm_and_scale(const Tensor& out, double sum_squares, double max_norm, double loss_scale) {
  const double norm = std::sqrt(sum_squares) / loss_scale;
  float* o = out.data<float>();
  o[0] = static_cast<float>(norm);
  o[1] = clip_scale(norm, max_norm, loss_scale);
}

}  // namespace

void gradient_norm_and_scale(const Tensor& out, const Tensor& grads, double max_norm, const GradScale& loss_scale) {
  write_norm_and_scale(out, chunked_sum<true>(grads), max_norm, loss_scale.read());
}

void accumulate_sum_squares(const Tensor& total, const Tensor& x) {
  float& t = total.data<float>()[0];
  t = static_cast<float>(static_cast<double>(t) + chunked_sum<true>(x));
}

void norm_and_scale(const Tensor& out, const Tensor& sum_squares, double max_norm, const GradScale& loss_scale) {
  write_norm_and_scale(out, static_cast<double>(sum_squares.data<float>()[0]), max_norm, loss_scale.read());
}

}  // namespace lab::ops::cpu
