// Bias + GELU on the CPU (see bias_gelu_versions.h): separate passes over memory against one fused pass.
//
// Separate, as a chain of simple ops does it: the bias pass writes pre = x + bias, then the core's GELU reads
// pre and writes out; in the backward, GELU's backward writes dx and a column-sum pass reads all of dx again
// for dbias. Fused: one pass per row computes gelu(x + bias) straight from x, and the backward adds each row's
// dx into its chunk's dbias sums while the row is still in L1. At GPT-2's sizes (8192 x 3072 floats, 100 MB a
// tensor) the tensors live in DRAM, so the fused versions save a whole tensor's write and read each way.
//
// dbias is summed by chunks of kRowsPerChunk rows, the chunks then added in order: the same bits whatever the
// thread count, in both versions.
#include <algorithm>
#include <vector>

#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_versions.h"
#include "ch06_single_gpu/kernels/03_bias_gelu/gelu_tanh.h"
#include "common/ops/cpu/vec_math.h"
#include "common/ops/gelu.h"

namespace lab::ch06::bias_gelu {

namespace {

using gelu_tanh::kCubic;
using gelu_tanh::kSqrt2OverPi;
using ops::cpu::exp_fast;

constexpr int64_t kRowsPerChunk = 64;

// The core's formulas (common/ops/gelu.h): gelu(v) = v * sigmoid(2u), written v / (1 + exp(-2u)), and
// gelu'(v) = s + 2 v s (1 - s) u',  s = sigmoid(2u),  u = sqrt(2/pi) (v + 0.044715 v^3).
inline float gelu_exp(float v) {
  return exp_fast(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v));
}
inline float gelu_slope(float v) {
  const float s = 1.0f / (1.0f + gelu_exp(v));
  return s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
}

int64_t rows_of(const Tensor& t, int64_t OC) {
  return OC > 0 ? t.numel() / OC : 0;
}

// dbias[c] += sum over chunks k of partials[k][c], in chunk order.
void add_chunk_sums(float* dbias, const std::vector<float>& partials, int64_t chunks, int64_t OC) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < OC; ++c) {
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) sum += partials[static_cast<size_t>(k * OC + c)];
    dbias[c] += sum;
  }
}

}  // namespace

void cpu_forward_separate(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& bias) {
  const int64_t OC = bias.numel(), N = rows_of(x, OC);
  const float* xp = x.data<float>();
  const float* bp = bias.data<float>();
  float* pp = pre.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
#pragma omp simd
    for (int64_t c = 0; c < OC; ++c) pp[n * OC + c] = xp[n * OC + c] + bp[c];
  }
  ops::cpu::gelu_forward(out, pre);
}

void cpu_backward_separate(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& pre) {
  const int64_t OC = dbias.numel(), N = rows_of(pre, OC);
  const float* pp = pre.data<float>();
  const float* dp = dout.data<float>();
  float* dxp = dx.data<float>();
  const int64_t n_elements = N * OC;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n_elements; ++i) dxp[i] = gelu_slope(pp[i]) * dp[i];
  // The column sums: a second pass, reading dx back.
  const int64_t chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<float> partials(static_cast<size_t>(chunks * OC), 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    float* sum = partials.data() + k * OC;
    for (int64_t n = k * kRowsPerChunk; n < std::min(N, (k + 1) * kRowsPerChunk); ++n) {
#pragma omp simd
      for (int64_t c = 0; c < OC; ++c) sum[c] += dxp[n * OC + c];
    }
  }
  add_chunk_sums(dbias.data<float>(), partials, chunks, OC);
}

void cpu_forward_fused(const Tensor& out, const Tensor& x, const Tensor& bias) {
  const int64_t OC = bias.numel(), N = rows_of(x, OC);
  const float* xp = x.data<float>();
  const float* bp = bias.data<float>();
  float* op = out.data<float>();
  // Two loops over each row: the exponentials into a row of scratch in L1, then the divisions. Written as one
  // loop, GCC -O3 turns exp_fast's clamp into a second division, v / (1 + exp(88)), computed for every lane and
  // blended away; its results are subnormal, and on x86 each costs a microcode assist. On the 2-core Xeon VM
  // (one thread, 8192 x 3072) the one-loop form took 330 to 390 ms, this one 83 to 128 ms (README.md).
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(OC));
    float* e = row.data();
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = xp + n * OC;
#pragma omp simd
      for (int64_t c = 0; c < OC; ++c) e[c] = gelu_exp(xr[c] + bp[c]);
#pragma omp simd
      for (int64_t c = 0; c < OC; ++c) op[n * OC + c] = (xr[c] + bp[c]) / (1.0f + e[c]);  // v / (1 + exp(-2u))
    }
  }
}

void cpu_backward_fused(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& x,
                        const Tensor& bias) {
  const int64_t OC = bias.numel(), N = rows_of(x, OC);
  const float* xp = x.data<float>();
  const float* bp = bias.data<float>();
  const float* dp = dout.data<float>();
  float* dxp = dx.data<float>();
  const int64_t chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<float> partials(static_cast<size_t>(chunks * OC), 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    float* sum = partials.data() + k * OC;
    for (int64_t n = k * kRowsPerChunk; n < std::min(N, (k + 1) * kRowsPerChunk); ++n) {
#pragma omp simd
      for (int64_t c = 0; c < OC; ++c) {
        const float g = gelu_slope(xp[n * OC + c] + bp[c]) * dp[n * OC + c];
        dxp[n * OC + c] = g;
        sum[c] += g;
      }
    }
  }
  add_chunk_sums(dbias.data<float>(), partials, chunks, OC);
}

}  // namespace lab::ch06::bias_gelu
