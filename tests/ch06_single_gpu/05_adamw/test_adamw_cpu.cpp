// Lab 05 on the CPU: every CPU version of the AdamW lab (fp32 and bf16 tables) against the CPU reference on GPT-2
// tiny's layout and an odd one (in both orders); ch06::flat_adamw(_bf16) on the CPU: decay ranges against the
// core's op, stochastic rounding that keeps tiny updates, repeatable for a seed; bad arguments. Label ch06.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch06_single_gpu/flat_adamw.h"
#include "tests/ch06_single_gpu/05_adamw/adamw_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

// ================================================================ the lab's CPU versions

TEST(AdamWLabCpu, EveryVersionMatchesTheReference) {
  for (const test::NamedLayout& layout : test::adamw_layouts())
    for (const test::NamedProblem& p : test::adamw_problems()) {
      SCOPED_TRACE(layout.name + ", " + p.name);
      const kernel_lab::KernelLab lab = ch06::make_adamw_lab(p.problem, layout.store);
      const std::vector<int> cpu = test::versions_on(lab, DeviceType::CPU);
      ASSERT_EQ(cpu.size(), p.problem.table == ch06::AdamWTable::FP32 ? 3u : 2u);
      for (const int n : cpu) EXPECT_TRUE(test::version_passes(lab, n));
    }
}

// ================================================================ the promoted op

TEST(FlatAdamWCpu, DecayRangesMatchTheCore) {
  test::expect_decay_ranges_match_the_core(Device::cpu());
}

TEST(FlatAdamWCpu, TinyUpdatesSurviveStochasticRounding) {
  test::expect_tiny_updates_survive_stochastic_rounding(Device::cpu());
}

TEST(FlatAdamWCpu, StochasticRoundingIsRepeatableForASeed) {
  test::expect_stochastic_rounding_repeatable(Device::cpu());
}

TEST(FlatAdamWCpu, BadArgumentsAreClearErrors) {
  const auto f32 = [](int64_t n) { return Tensor::zeros({n}, DType::F32); };
  const Tensor p = f32(8), g = f32(8), m = f32(8), v = f32(8);
  const ops::AdamWHyper h;
  testing::expect_error([&] { ch06::flat_adamw(p, g, f32(7), v, h, 1.0f, {}); }, ErrorKind::InvalidArgument,
                        {"flat_adamw", "different sizes (7 vs 8)"});
  for (const std::vector<ElementRange>& bad :
       {std::vector<ElementRange>{{0, 9}}, std::vector<ElementRange>{{-1, 2}},
        std::vector<ElementRange>{{0, 4}, {3, 6}}, std::vector<ElementRange>{{4, 6}, {0, 2}}})
    testing::expect_error([&] { ch06::flat_adamw(p, g, m, v, h, 1.0f, bad); }, ErrorKind::InvalidArgument,
                          {"is not sorted, disjoint and inside [0, 8)"});
  ops::AdamWHyper step0 = h;
  step0.step = 0;
  testing::expect_error([&] { ch06::flat_adamw(p, g, m, v, step0, 1.0f, {}); }, ErrorKind::InvalidArgument,
                        {"step must be >= 1"});
  const Tensor p16 = Tensor::zeros({8}, DType::BF16);
  testing::expect_error([&] { ch06::flat_adamw(p16, g, m, v, h, 1.0f, {}); }, ErrorKind::InvalidArgument, {"bf16"});
  testing::expect_error([&] { ch06::flat_adamw_bf16(p, p, g, m, v, h, 1.0f, {}, {}); }, ErrorKind::InvalidArgument,
                        {"flat_adamw_bf16"});
  testing::expect_error([&] { ch06::flat_adamw_bf16(p16, f32(4), g, m, v, h, 1.0f, {}, {}); },
                        ErrorKind::InvalidArgument, {"4 master weights for 8 parameters"});
  testing::expect_error([&] { ch06::flat_adamw_bf16(p16, p, Tensor::zeros({8}, DType::I32), m, v, h, 1.0f, {}, {}); },
                        ErrorKind::InvalidArgument, {"gradients must be f32 or bf16, got i32"});
}

}  // namespace
}  // namespace lab
