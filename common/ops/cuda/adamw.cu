// CUDA kernels of common/ops/adamw.h: one fused pass over the flat buffers.
//
// Parallelisation: one thread per parameter, kBlockSize threads a block; each thread reads p, g, m, v
// once and writes p, m, v once (coalesced), so the update runs at memory bandwidth. The bias corrections
// depend only on the step and are computed on the host, in double, exactly as the CPU reference does.
//
// Weight decay by ranges: the decayed ranges travel in the kernel's arguments (a table of up to
// kRangesPerLaunch), and each thread finds by binary search whether its element lies in one. Parameters start
// at multiples of 32 elements, so the 32 threads of a warp nearly always agree and read the same entries
// (a broadcast). A model with more ranges than a table holds (GPT-2 d12 has 49) takes one launch per table,
// each over the stretch of the buffer from its first range to the next table's.
#include <cmath>

#include "common/ops/adamw.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ops::cuda {

namespace {

struct AdamWConstants {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};

constexpr int kRangesPerLaunch = 64;

// Sorted, disjoint [begin[r], end[r]) with weight decay; 1 KB of the 4 KB of a launch's arguments.
struct DecayTable {
  int count = 0;
  int64_t begin[kRangesPerLaunch];
  int64_t end[kRangesPerLaunch];
};

// ---------------------------------------------------------------- kernel

__device__ bool decays(const DecayTable& table, int64_t i) {
  int lo = 0, hi = table.count;  // find the number of ranges that begin at or before i
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table.begin[mid] <= i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && i < table.end[lo - 1];
}

// Elements [first, end) of the buffers.
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, int64_t first, int64_t end,
                             AdamWConstants k, DecayTable decay) {
  const int64_t i = first + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= end) return;
  const float g = grads[i] * k.grad_scale;
  const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float m_hat = mi / k.bias_correction1;
  const float v_hat = vi / k.bias_correction2;
  const float p = params[i];
  const float weight_decay = decays(decay, i) ? k.weight_decay : 0.0f;
  params[i] = p - k.lr * (m_hat / (sqrtf(v_hat) + k.eps) + weight_decay * p);
}

}  // namespace

// ---------------------------------------------------------------- launcher

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  float grad_scale, const std::vector<ElementRange>& decay) {
  const int64_t n = params.numel();
  if (n == 0) return;
  const double t = static_cast<double>(hyper.step);
  const AdamWConstants k{hyper.lr,
                         hyper.beta1,
                         hyper.beta2,
                         hyper.eps,
                         hyper.weight_decay,
                         grad_scale,
                         static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), t)),
                         static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta2), t))};
  LaunchScope scope(params);
  const int64_t ranges = static_cast<int64_t>(decay.size());
  int64_t first = 0;  // the first element of this launch's stretch
  for (int64_t r = 0; r == 0 || r < ranges; r += kRangesPerLaunch) {
    DecayTable table;
    for (int64_t j = r; j < ranges && j < r + kRangesPerLaunch; ++j, ++table.count) {
      table.begin[table.count] = decay[static_cast<size_t>(j)].begin;
      table.end[table.count] = decay[static_cast<size_t>(j)].end;
    }
    const int64_t next = r + kRangesPerLaunch;
    const int64_t end = next < ranges ? decay[static_cast<size_t>(next)].begin : n;
    if (end > first)
      LAB_LAUNCH(adamw_kernel, {grid_for(end - first, kBlockSize), kBlockSize, 0, scope.stream()}, params.data<float>(),
                 grads.data<float>(), m.data<float>(), v.data<float>(), first, end, k, table);
    first = end;
  }
}

}  // namespace lab::ops::cuda
