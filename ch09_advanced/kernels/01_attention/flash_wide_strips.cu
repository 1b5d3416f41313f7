// v11 and v12 of the attention lab: the core's kernels with two strips of 16 rows a warp, as FlashAttention-2 tiles
// head size 64. v11, the forward: 128-query tiles, each K or V fragment read from shared memory feeding both strips,
// each K/V tile copied into shared memory serving 128 queries (common/ops/cuda/flash_attention_forward.cuh says what
// that changes, what it costs, and why head size 128 keeps one strip); its backward is v7's. v12, the backward:
// v7's kernels with two strips a warp, the dK/dV kernel on 128-key tiles (each Q or dO fragment feeding both strips
// of keys) and the dQ kernel on 128-query tiles (each K or V fragment feeding both strips of queries)
// (common/ops/cuda/flash_attention_backward.cuh); its forward is v11's. v13: v12 with the dK/dV kernel in steps of
// 16 queries instead of 32 (244 registers a thread instead of 255, the warp's K and V fragments read twice as often).
#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/ops/cuda/flash_attention_backward.cuh"
#include "common/ops/cuda/flash_attention_forward.cuh"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch09::attention_lab {

void flash_wide_strips_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const ops::cuda::flash::Dims s = ops::cuda::flash::dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  ops::cuda::flash::launch_flash_forward<2>("flash_forward_kernel", out, lse, qkv, s, scope.stream());
}

namespace {

// The backward with two strips a warp, the dK/dV kernel in steps of kKeyStep queries, added into dqkv.
template <int kKeyStep>
void wide_strips_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& lse, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const ops::cuda::flash::Dims s = ops::cuda::flash::dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  ops::cuda::flash::launch_flash_backward<2, kKeyStep>(dqkv, dout, qkv, out, lse, s, scope.stream(), /*add=*/true);
}

}  // namespace

void flash_wide_strips_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                const Tensor& lse, int n_head) {
  wide_strips_backward<ops::cuda::flash::kQueryStep>(dqkv, dout, qkv, out, lse, n_head);
}

void flash_wide_strips_short_steps_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                            const Tensor& out, const Tensor& lse, int n_head) {
  wide_strips_backward<16>(dqkv, dout, qkv, out, lse, n_head);
}

}  // namespace lab::ch09::attention_lab
