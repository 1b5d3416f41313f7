// The CUDA AdamW kernel with weight decay by ranges against the CPU op: a few ranges, none, and more ranges
// than one launch's table holds (several launches, each over its stretch of the buffer), at odd sizes; and the
// step values read from device memory (what a CUDA graph's replay reads), rewritten between two launches; the
// parameters' 16-bit copy written in the same pass, bit for bit what the CUDA conversion gives after the update.
#include <gtest/gtest.h>

#include <cmath>

#include "common/ops/adamw.h"
#include "common/ops/convert.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

std::vector<ElementRange> every_other(int64_t count, int64_t width, int64_t gap) {
  std::vector<ElementRange> ranges;
  for (int64_t i = 0; i < count; ++i) ranges.push_back({i * (width + gap) + gap, i * (width + gap) + gap + width});
  return ranges;
}

TEST(AdamWRangesCuda, MatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  struct Case {
    int64_t n;
    std::vector<ElementRange> decay;
  };
  const std::vector<Case> cases = {{1, {}},
                                   {1000, {{0, 3}, {64, 65}, {100, 400}, {999, 1000}}},
                                   {5000, every_other(200, 11, 13)},
                                   {33 * 129, every_other(129, 32, 1)}};
  Rng rng(21);
  for (const Case& c : cases) {
    const int64_t n = c.n;
    const Tensor p = test::random_normal({n}, rng), g = test::random_normal({n}, rng);
    const Tensor m = test::random_normal({n}, rng, 0.1f);
    std::vector<float> vs = test::random_normal({n}, rng, 0.1f).to_floats();
    for (float& x : vs) x *= x;
    const Tensor v = Tensor::from_floats(vs, {n});
    const Tensor pg = p.to(Device::cuda(0)), mg = m.to(Device::cuda(0)), vg = v.to(Device::cuda(0));
    const ops::AdamWHyper h{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f, .step = 2};
    ops::adamw_update(p, g, m, v, h, 0.5f, c.decay);
    ops::adamw_update(pg, g.to(Device::cuda(0)), mg, vg, h, 0.5f, c.decay);
    const std::vector<float> want = p.to_floats(), got = pg.to_floats();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << "n " << n << ", " << i;
    EXPECT_EQ(mg.to_floats().size(), m.to_floats().size());
    const std::vector<float> wm = m.to_floats(), gm = mg.to_floats();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(gm[i], wm[i], 1e-6f * (1 + std::fabs(wm[i]))) << "m, n " << n << ", " << i;
  }
}

TEST(AdamWRangesCuda, StepValuesReadFromDeviceMemoryGiveTheUpdateOfTheNumbers) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const Device gpu = Device::cuda(0);
  Rng rng(22);
  const int64_t n = 777;
  const Tensor p = test::random_normal({n}, rng).to(gpu), g = test::random_normal({n}, rng).to(gpu);
  const Tensor m = Tensor::zeros({n}, DType::F32, gpu), v = Tensor::zeros({n}, DType::F32, gpu);
  const Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  const Tensor step_values = Tensor::zeros({ops::kStepValues}, DType::F32, gpu);
  const std::vector<ElementRange> decay = {{5, 300}, {400, 777}};
  for (const int64_t step : {1, 2, 9}) {
    const ops::AdamWHyper numbers{.lr = 1e-2f / static_cast<float>(step),
                                  .beta1 = 0.9f,
                                  .beta2 = 0.95f,
                                  .eps = 1e-8f,
                                  .weight_decay = 0.1f,
                                  .step = step};
    ops::adamw_update(p, g, m, v, numbers, 0.5f, decay);
    step_values.copy_from(Tensor::from_floats(ops::adamw_step_values(numbers), {ops::kStepValues}));
    ops::AdamWHyper from_memory = numbers;
    from_memory.lr = 0.0f;  // unused
    from_memory.step = 1;
    from_memory.step_values = step_values;
    ops::adamw_update(p2, g, m2, v2, from_memory, 0.5f, decay);
    ASSERT_EQ(p2.to_floats(), p.to_floats()) << "step " << step;
    ASSERT_EQ(v2.to_floats(), v.to_floats()) << "step " << step;
  }
}

TEST(AdamWRangesCuda, TheUpdateWritesThe16BitCopyAsConvertRoundsIt) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const Device gpu = Device::cuda(0);
  Rng rng(23);
  const int64_t n = 5000;  // several decay tables' launches (every_other: 200 ranges)
  const std::vector<ElementRange> decay = every_other(200, 11, 13);
  for (const DType dtype : {DType::BF16, DType::F16}) {
    const Tensor p = test::random_normal({n}, rng).to(gpu), g = test::random_normal({n}, rng).to(gpu);
    const Tensor m = Tensor::zeros({n}, DType::F32, gpu), v = Tensor::zeros({n}, DType::F32, gpu);
    const Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
    const Tensor copy = Tensor::zeros({n}, dtype, gpu);
    const ops::AdamWHyper h{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1};
    ops::adamw_update(p, g, m, v, h, 0.5f, decay);
    ops::adamw_update(p2, g, m2, v2, h, 0.5f, decay, copy);
    ASSERT_EQ(p2.to_floats(), p.to_floats()) << dtype_name(dtype);
    const Tensor rounded = Tensor::empty({n}, dtype, gpu);
    ops::convert(rounded, p);
    EXPECT_EQ(copy.to_floats(), rounded.to_floats()) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace lab
