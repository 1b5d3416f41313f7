// What the classifier's CPU versions and the promoted op's CPU path share: the check of the targets, and the
// online softmax's running state, the maximum of a row and the sum of exp(x - max) gathered in one pass over
// memory (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax").
//
// The GPU versions update the pair element by element (online_softmax.cuh). On the CPU that would cost two
// exponentials per element or a branch per element, and neither vectorises; instead the row is taken in chunks
// small enough to stay in L1: the chunk's maximum (one vectorised loop), the running sum rescaled once if the
// maximum grew, then the chunk's exponentials (a second vectorised loop, over data now in L1). Memory, or L2,
// sees the row once; the second look at each chunk costs an L1 hit. This is the blocked form flash attention
// uses for its tiles.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ch06::classifier {

// Error(InvalidArgument) naming the row of the first target outside [0, vocab) (i32 targets on the CPU).
inline void check_targets(const Tensor& targets, int64_t vocab) {
  const int32_t* t = targets.data<int32_t>();
  for (int64_t n = 0; n < targets.numel(); ++n)
    LAB_CHECK(t[n] >= 0 && t[n] < vocab, InvalidArgument, "fused_classifier: target ", t[n], " at row ", n,
              " is outside [0, ", vocab, ")");
}

struct MaxSum {
  float max = -INFINITY;
  float sum = 0.0f;  // of exp(x - max) over the elements seen
};

// 1024 floats (4 KiB): a chunk and its neighbours stay in any L1 data cache.
inline constexpr int64_t kOnlineChunk = 1024;

inline MaxSum online_max_sum(const float* row, int64_t n) {
  MaxSum state;
  for (int64_t begin = 0; begin < n; begin += kOnlineChunk) {
    const int64_t end = std::min(n, begin + kOnlineChunk);
    float chunk_max = -INFINITY;
#pragma omp simd reduction(max : chunk_max)
    for (int64_t v = begin; v < end; ++v) chunk_max = row[v] > chunk_max ? row[v] : chunk_max;
    if (chunk_max > state.max) {
      // exp_fast clamps its argument at -87, so the first chunk (max = -inf) scales a zero sum by ~1e-38.
      state.sum *= ops::cpu::exp_fast(state.max - chunk_max);
      state.max = chunk_max;
    }
    const float mx = state.max;
    float chunk_sum = 0.0f;
#pragma omp simd reduction(+ : chunk_sum)
    for (int64_t v = begin; v < end; ++v) chunk_sum += ops::cpu::exp_fast(row[v] - mx);
    state.sum += chunk_sum;
  }
  return state;
}

}  // namespace lab::ch06::classifier
