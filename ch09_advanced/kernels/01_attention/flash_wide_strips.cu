// v11 of the attention lab: the core's forward (v7) with 128-query tiles, 32 queries a warp in two strips of 16,
// as FlashAttention-2 tiles head size 64: each K or V fragment read from shared memory feeds both strips, and each
// K/V tile copied into shared memory serves 128 queries. The kernel is the core's own, instantiated with two
// strips a warp (common/ops/cuda/flash_attention_forward.cuh says what that changes, what it costs, and why head
// size 128 keeps one strip); the backward is v7's.
#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/ops/cuda/flash_attention_forward.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch09::attention_lab {

void flash_wide_strips_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const ops::cuda::flash::Dims s = ops::cuda::flash::dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  ops::cuda::flash::launch_flash_forward<2>("flash_forward_kernel", out, lse, qkv, s, scope.stream());
}

}  // namespace lab::ch09::attention_lab
