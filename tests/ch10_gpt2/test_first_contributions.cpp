// A training step's gradients over a buffer holding anything, on the CPU, where the step zero-fills the buffer
// (ParameterStore::start_new_gradients): the core's kernels and chapter 6's fused ones, in f32 and with 16-bit
// activations, with and without accumulation (first_contributions.h).
#include <gtest/gtest.h>

#include "ch06_single_gpu/fused_model.h"
#include "tests/ch10_gpt2/first_contributions.h"

namespace lab {
namespace {

TEST(FirstContributions, TheStepWritesEveryParameterGradientOverOnTheCpu) {
  const Device cpu = Device::cpu();
  test::expect_step_writes_every_gradient("f32, core", cpu, DType::F32, {}, 1);
  test::expect_step_writes_every_gradient("f32, core, 2 micro-batches", cpu, DType::F32, {}, 2);
  test::expect_step_writes_every_gradient("f32, fused", cpu, DType::F32, ch06::with_kernels({}, ch06::Kernels::Fused),
                                          1);
  test::expect_step_writes_every_gradient("bf16, core", cpu, DType::BF16, {}, 1);
  test::expect_step_writes_every_gradient("bf16, fused, 2 micro-batches", cpu, DType::BF16,
                                          ch06::with_kernels({}, ch06::Kernels::Fused), 2);
}

}  // namespace
}  // namespace lab
