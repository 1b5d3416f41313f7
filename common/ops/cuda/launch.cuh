// What every op launcher needs: the tensor's device made current, that device's current stream, and
// the grid arithmetic for "one thread per element" kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "common/core/error.h"
#include "common/core/tensor.h"
#include "common/cuda/check.h"
#include "common/cuda/launch.cuh"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

namespace lab::ops::cuda {

// Threads per block of the elementwise kernels: a multiple of the warp size, enough warps per block to
// hide memory latency, small enough that a partial last block wastes little.
inline constexpr int kBlockSize = 256;

// For the scope of a launcher: makes `t`'s device current and holds that device's current stream.
class LaunchScope {
 public:
  explicit LaunchScope(const Tensor& t)
      : guard_(t.device().index), stream_(lab::cuda::current_stream(t.device().index)) {}
  cudaStream_t stream() const { return stream_; }

 private:
  lab::cuda::DeviceGuard guard_;
  cudaStream_t stream_;
};

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Blocks of `block` threads that cover `n` work items (n > 0), checked against the grid's x limit.
inline unsigned int grid_for(int64_t n, int block) {
  const int64_t blocks = ceil_div(n, block);
  LAB_CHECK(n > 0 && blocks <= std::numeric_limits<int32_t>::max(), Unsupported, "a launch over ", n,
            " items does not fit one grid");
  return static_cast<unsigned int>(blocks);
}

// cuBLAS takes int dimensions; checks that a size fits one.
inline int as_blas_int(int64_t v, const char* what) {
  LAB_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), Unsupported, what, " = ", v,
            " is too large for one cuBLAS call");
  return static_cast<int>(v);
}

}  // namespace lab::ops::cuda
