// A training step without the gradients' zero-fill, on CUDA (label cuda: runs in the emulation build, skips without
// a GPU): every parameter's gradient is written over by its first contribution: the weight gradients' GEMMs with
// beta = 0, the bias gradients from cuBLASLt's epilogue or the column sums stored, LayerNorm's totals stored
// (first_contributions.h).
#include <gtest/gtest.h>

#include "ch06_single_gpu/fused_model.h"
#include "common/autograd/functions.h"
#include "tests/ch10_gpt2/first_contributions.h"

namespace lab {
namespace {

TEST(FirstContributionsCuda, TheStepWritesEveryParameterGradientOver) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const Device gpu = Device::cuda();
  const ModelOptions fused = ch06::with_kernels({}, ch06::Kernels::Fused);
  ModelOptions flash;
  flash.attention = [](Tape& tape, const Var& qkv, int n_head) {
    return ag::flash_attention(tape, qkv, n_head, DType::BF16);
  };
  test::expect_step_writes_every_gradient("f32, core", gpu, DType::F32, {}, 1);
  test::expect_step_writes_every_gradient("f32, fused, 2 micro-batches", gpu, DType::F32, fused, 2);
  test::expect_step_writes_every_gradient("bf16, core", gpu, DType::BF16, {}, 1);
  test::expect_step_writes_every_gradient("bf16, core, 2 micro-batches", gpu, DType::BF16, {}, 2);
  test::expect_step_writes_every_gradient("bf16, fused", gpu, DType::BF16, fused, 1);
  test::expect_step_writes_every_gradient("bf16, flash attention", gpu, DType::BF16, flash, 1);
}

}  // namespace
}  // namespace lab
