// The widening kernel of stage 4 (see widen_tokens.h): one thread per position of the batch.
//
// Consecutive threads read consecutive u16 tokens and write consecutive i32 inputs and targets, so every
// access is coalesced. Each token is read twice (as the input at i and as the target at i - 1); both
// reads hit the same cache lines, and the kernel moves a few hundred kilobytes at most.
#include "ch05_data/loaders/widen_tokens.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch05 {

namespace {

// ---------------------------------------------------------------- kernel

__global__ void widen_tokens_kernel(const uint16_t* tokens, int32_t* inputs, int32_t* targets, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  inputs[i] = tokens[i];
  targets[i] = tokens[i + 1];
}

}  // namespace

// ---------------------------------------------------------------- launcher

void widen_tokens_on_device(const Tensor& tokens, const Tensor& inputs, const Tensor& targets) {
  const int64_t n = inputs.numel();
  tokens.check_dtype(DType::U16, "widen_tokens: tokens");
  inputs.check_dtype(DType::I32, "widen_tokens: inputs");
  targets.check_dtype(DType::I32, "widen_tokens: targets");
  LAB_CHECK(tokens.numel() == n + 1 && targets.numel() == n, InvalidArgument, "widen_tokens: ", tokens.numel(),
            " tokens for inputs of ", n, " and targets of ", targets.numel(), " elements (expected n + 1, n, n)");
  for (const Tensor* t : {&tokens, &targets}) t->check_device(inputs.device(), "widen_tokens: operand");
  if (n == 0) return;
  using ops::cuda::kBlockSize;
  ops::cuda::LaunchScope scope(inputs);
  LAB_LAUNCH(widen_tokens_kernel, {ops::cuda::grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()},
             tokens.data<uint16_t>(), inputs.data<int32_t>(), targets.data<int32_t>(), n);
}

}  // namespace lab::ch05
