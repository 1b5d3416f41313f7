// Lab 05 on the GPU: every GPU version of the AdamW lab (fp32: v1-v4; bf16: both roundings) against the CPU
// reference on GPT-2 tiny's layout and an odd one (in both orders); multi-tensor apply with chunks small enough
// to fill its table many times over (tensors cut between launches, empty tensors, more tensors than slots);
// ch06::flat_adamw(_bf16) on CUDA: decay ranges with odd bounds and more than one launch's table of them,
// stochastic rounding that keeps tiny updates, repeatable for a seed. Labels ch06 and cuda: they run in the
// emulation build and skip without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch06_single_gpu/kernels/05_adamw/adamw_versions.h"
#include "common/util/rng.h"
#include "tests/ch06_single_gpu/05_adamw/adamw_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/support/op_check.h"

namespace lab {
namespace {

using test::kGpu;

// ================================================================ the lab's GPU versions

TEST(AdamWLabGpu, EveryVersionMatchesCpu) {
  LAB_REQUIRE_GPU();
  for (const test::NamedLayout& layout : test::adamw_layouts())
    for (const test::NamedProblem& p : test::adamw_problems()) {
      SCOPED_TRACE(layout.name + ", " + p.name);
      const kernel_lab::KernelLab lab = ch06::make_adamw_lab(p.problem, layout.store);
      const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
      ASSERT_EQ(gpu.size(), p.problem.table == ch06::AdamWTable::FP32 ? 4u : 2u);
      for (const int n : gpu) EXPECT_TRUE(test::version_passes(lab, n));
    }
}

// ================================================================ multi-tensor apply's table

// 120 tensors of 0 to 300 elements (some empty) in one flat buffer, updated by multi_tensor_adamw on the GPU and
// by the per-tensor loop on the CPU. With chunks of 1 element a launch's 320 blocks cut tensors in the middle;
// with 16, tensors fill the 36 slots before the blocks run out, and both happen; with 1000, every tensor is one
// chunk and only the slots limit a launch.
TEST(MultiTensorAdamW, EveryChunkOfEveryTensorIsUpdatedOnce) {
  LAB_REQUIRE_GPU();
  Rng rng(17);
  std::vector<int64_t> sizes;
  for (int i = 0; i < 120; ++i) sizes.push_back(i % 10 == 3 ? 0 : static_cast<int64_t>(rng.below(301)));
  int64_t total = 0;
  for (const int64_t s : sizes) total += s;
  auto random = [&](float scale, bool square) {
    std::vector<float> x(static_cast<size_t>(total));
    for (float& e : x) {
      const float r = rng.normal(0.0f, scale);
      e = square ? r * r : r;
    }
    return Tensor::from_floats(x, {total});
  };
  const Tensor p = random(0.02f, false), g = random(0.01f, false), m = random(0.01f, false), v = random(0.01f, true);
  const ops::AdamWHyper hyper{
      .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f, .step = 2};
  auto sets_of = [&](const Tensor& tp, const Tensor& tg, const Tensor& tm, const Tensor& tv) {
    std::vector<ch06::adamw::TensorSet> sets;
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto view = [&](const Tensor& t) { return t.view(offset, {sizes[i]}); };
      sets.push_back({view(tp), view(tg), view(tm), view(tv), i % 3 == 0});
      offset += sizes[i];
    }
    return sets;
  };
  const Tensor ep = p.clone(), em = m.clone(), ev = v.clone();
  ch06::adamw::per_tensor_adamw(sets_of(ep, g, em, ev), hyper, 0.5f);
  for (const int64_t chunk : {int64_t{1}, int64_t{16}, int64_t{1000}}) {
    SCOPED_TRACE(cat("chunk ", chunk));
    const Tensor dp = p.to(kGpu), dm = m.to(kGpu), dv = v.to(kGpu);
    ch06::adamw::multi_tensor_adamw(sets_of(dp, g.to(kGpu), dm, dv), hyper, 0.5f, chunk);
    const Tolerance tol = tolerance_for(DType::F32, 1);
    EXPECT_TRUE(test::all_close("params", dp, ep, tol));
    EXPECT_TRUE(test::all_close("m", dm, em, tol));
    EXPECT_TRUE(test::all_close("v", dv, ev, tol));
  }
}

// ================================================================ the promoted op

TEST(FlatAdamWGpu, DecayRangesMatchTheCore) {
  LAB_REQUIRE_GPU();
  test::expect_decay_ranges_match_the_core(kGpu);
}

TEST(FlatAdamWGpu, TinyUpdatesSurviveStochasticRounding) {
  LAB_REQUIRE_GPU();
  test::expect_tiny_updates_survive_stochastic_rounding(kGpu);
}

TEST(FlatAdamWGpu, StochasticRoundingIsRepeatableForASeed) {
  LAB_REQUIRE_GPU();
  test::expect_stochastic_rounding_repeatable(kGpu);
}

}  // namespace
}  // namespace lab
