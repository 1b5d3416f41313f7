// Every rung's share of the memory theory (ch10_gpt2/run_memory_theory.h) on CUDA (label cuda: runs in the
// emulation build, skips without a GPU), where the CPU cannot show it: the offloaded optimizer holds no state on
// the device, and bf16 with 16-bit activations and flash attention keeps the parameters, gradients and moments of
// theory. The CUDA allocator counts its blocks rounded up to its size classes: each category is theory's bytes
// plus at most 5% at this tiny size.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/core/device.h"
#include "tests/ch10_gpt2/run_memory_check.h"

namespace lab {
namespace {

void expect_theory_rounded_up(const test::StepMemory& m, MemCategory c) {
  EXPECT_GE(m.peak_of(c), m.theory.of(c)) << mem_category_name(c);
  EXPECT_LE(static_cast<double>(m.peak_of(c)), 1.05 * static_cast<double>(m.theory.of(c))) << mem_category_name(c);
}

TEST(RunMemoryTheoryCuda, TheOffloadedOptimizerLeavesTheDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  RunConfig config = test::tiny_theory_run(Device::cuda());
  const test::StepMemory on_device = test::measure_step_memory(config);
  config.memory.offload_optimizer = true;
  const test::StepMemory offloaded = test::measure_step_memory(config);
  EXPECT_EQ(offloaded.theory.of(MemCategory::Optimizer), 0);
  EXPECT_EQ(offloaded.peak_of(MemCategory::Optimizer), 0);
  expect_theory_rounded_up(on_device, MemCategory::Optimizer);
  for (const MemCategory c : {MemCategory::Params, MemCategory::Grads}) expect_theory_rounded_up(offloaded, c);
}

TEST(RunMemoryTheoryCuda, Bf16WithSixteenBitActivationsAndFlashAttention) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  RunConfig config = test::tiny_theory_run(Device::cuda());
  config.math = MathMode::BF16;
  config.rungs = ModelRungs::parse("fused", "flash", "none", "16bit");
  const test::StepMemory m = test::measure_step_memory(config);
  for (const MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer})
    expect_theory_rounded_up(m, c);
  // The stored activations in 2 bytes, and flash attention's log-sum-exp instead of the probabilities.
  const auto peak = static_cast<double>(m.peak_of(MemCategory::Activations)),
             theory = static_cast<double>(m.theory.of(MemCategory::Activations));
  EXPECT_GE(peak, theory);
  EXPECT_LE(peak, 1.5 * theory);
  std::printf("activations: peak %.0f bytes, theory %.0f, peak/theory %.3f\n", peak, theory, peak / theory);
}

}  // namespace
}  // namespace lab
