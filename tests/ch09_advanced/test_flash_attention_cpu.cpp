// Chapter 9 on the CPU: the CPU flash attention (common/ops/flash_attention.h) against the materialised op of
// common/ops/attention.h and the fp64 reference, forward output, log-sum-exp and every gradient, at shapes
// off the 64-row tiles; the attention lab's CPU versions; its 16-bit storage; that it holds no T x T buffer; and
// its argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "ch09_advanced/kernels/01_attention/attention_lab.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/core/parallel.h"
#include "common/lab/compare.h"
#include "common/ops/flash_attention.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/ch09_advanced/flash_cases.h"
#include "tests/common/expect_error.h"
#include "tests/support/op_check.h"

namespace lab {
namespace {

using test::FlashCase;
using test::FlashInputs;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// T = 1 (one key), T just under, at and over one tile (63, 64, 65) and two (129, 130), T = 200 (a last tile of
// 8 rows); one to sixteen heads; GPT-2's head size 64, 128, and sizes that are not multiples of 8 or 16; scores of
// std 64 (spread 8), where a softmax without its max subtracted overflows.
const FlashCase kCases[] = {{1, 1, 1, 64},   {2, 63, 2, 64}, {1, 64, 1, 128}, {1, 65, 3, 64},      {2, 130, 1, 128},
                            {1, 129, 16, 8}, {3, 17, 5, 12}, {1, 200, 2, 64}, {2, 70, 2, 64, 8.0f}};

class FlashCpu : public ::testing::TestWithParam<FlashCase> {};

TEST_P(FlashCpu, MatchesMaterializedOp) {
  const FlashCase c = GetParam();
  Rng rng(test_seed());
  const FlashInputs in = test::random_flash_inputs(c, rng);
  const test::AttentionResult expected = test::run_materialized(in, c.NH);
  const test::AttentionResult flash = test::run_flash(in, c.NH, DType::F32, Device::cpu());
  // Scores of std spread^2: each input's rounding is amplified by the largest score in the exponent.
  const Tolerance tol = tolerance_for_offset(DType::F32, std::max(c.T, c.HS), 4.0 * c.spread * c.spread);
  EXPECT_TRUE(test::all_close("out", flash.out, expected.out, tol));
  EXPECT_TRUE(test::all_close("dqkv", flash.dqkv, expected.dqkv, tol));
  EXPECT_TRUE(test::all_close("lse", flash.lse, ch09::reference_forward(c.shape(), in.qkv).lse, tol));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashCpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name(); });

// The attention lab's CPU versions (the materialised reference, the flash attention and its one-pass backward),
// forward and backward,
// against its fp64 reference.
TEST(AttentionLabCpu, CpuVersionsPass) {
  for (const ch09::AttentionShape shape : {ch09::AttentionShape{2, 70, 3, 64}, ch09::AttentionShape{1, 1, 1, 128}}) {
    for (const ch09::LabPass pass : {ch09::LabPass::Forward, ch09::LabPass::Backward}) {
      const kernel_lab::KernelLab lab = ch09::make_attention_lab({shape, DType::BF16, test_seed()}, pass);
      const std::vector<int> cpu = test::versions_on(lab, DeviceType::CPU);
      ASSERT_EQ(cpu.size(), 3u) << "the reference, the flash attention and its one-pass backward";
      for (const int n : cpu) EXPECT_TRUE(test::version_passes(lab, n));
    }
  }
}

// bf16 and f16 storage: the same f32 arithmetic on the rounded inputs, so the outputs differ from the f32 flash
// on those inputs only by their own rounding (out, lse in f32) and dqkv's rounding after each add.
TEST(FlashCpuStorage, SixteenBitMatchesF32OnRoundedInputs) {
  Rng rng(test_seed());
  const FlashCase c{2, 130, 3, 64};
  const FlashInputs in = test::random_flash_inputs(c, rng);
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const FlashInputs rounded = test::rounded_to(in, dtype);
    const test::AttentionResult narrow = test::run_flash(rounded, c.NH, dtype, Device::cpu());
    const test::AttentionResult wide = test::run_flash(rounded, c.NH, DType::F32, Device::cpu());
    EXPECT_EQ(narrow.out.dtype(), dtype);
    const double eps = dtype_epsilon(dtype);
    EXPECT_TRUE(test::all_close("out", narrow.out, wide.out, {eps, eps}));
    EXPECT_TRUE(test::all_close("lse", narrow.lse, wide.lse, tolerance_for(DType::F32, c.T)));
    EXPECT_TRUE(test::all_close("dqkv", narrow.dqkv, wide.dqkv, {2 * eps, 2 * eps}));
  }
}

// The one-pass backward (FlashBackward::OnePass) makes the same sums in the same order as the two passes: the same
// bits, in f32 and 16-bit storage, added into random values and written over NaNs, at one tile, at a T that ends
// mid-tile over three tiles, with a narrow head and with T = 1.
TEST(FlashCpuOnePass, SameBitsAsTwoPasses) {
  for (const FlashCase c :
       {FlashCase{2, 130, 3, 64}, FlashCase{1, 64, 2, 128}, FlashCase{2, 70, 3, 16, 8.0f}, FlashCase{1, 1, 1, 32}}) {
    SCOPED_TRACE(c.name());
    Rng rng(test_seed());
    const FlashInputs in = test::random_flash_inputs(c, rng);
    for (const DType dtype : {DType::F32, DType::BF16}) {
      const FlashInputs rounded = dtype == DType::F32 ? in : test::rounded_to(in, dtype);
      for (const ops::GradWrite write : {ops::GradWrite::Add, ops::GradWrite::Overwrite}) {
        SCOPED_TRACE(cat(dtype_name(dtype), write == ops::GradWrite::Add ? " Add" : " Overwrite"));
        const Tensor two = test::run_flash(rounded, c.NH, dtype, Device::cpu(), write).dqkv;
        const Tensor one =
            test::run_flash(rounded, c.NH, dtype, Device::cpu(), write, ops::FlashBackward::OnePass).dqkv;
        EXPECT_EQ(one.to_floats(), two.to_floats());
      }
    }
  }
}

// GradWrite::Overwrite: from a dqkv of NaNs, every element written and none read, the same bits as adding into zeros
// (0 + x rounds to x), in f32 and 16-bit storage, at a T that ends mid-tile.
TEST(FlashCpuOverwrite, WritesEveryElementOfDqkvAsAddingIntoZeros) {
  Rng rng(test_seed());
  const FlashCase c{2, 70, 3, 16};
  FlashInputs in = test::random_flash_inputs(c, rng);
  in.dqkv_before = Tensor::zeros(in.qkv.shape(), DType::F32);
  for (const DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const FlashInputs rounded = dtype == DType::F32 ? in : test::rounded_to(in, dtype);
    const Tensor added = test::run_flash(rounded, c.NH, dtype, Device::cpu()).dqkv;
    const Tensor written = test::run_flash(rounded, c.NH, dtype, Device::cpu(), ops::GradWrite::Overwrite).dqkv;
    EXPECT_EQ(written.to_floats(), added.to_floats());
  }
}

// The point of the algorithm: memory linear in T. At T = 1024 one head's T x T f32 matrix is 4 MiB; the flash
// forward and backward together may add at most an eighth of that to the CPU allocator's peak (their scratch is
// a few tiles per thread, and two threads run here), while the materialised op's probabilities alone are the
// whole 4 MiB (checked too, so that the measurement is known to see such a buffer).
TEST(FlashCpuMemory, AllocatesNoTxTBuffer) {
  const int threads = num_threads();
  set_num_threads(2);
  Rng rng(test_seed());
  const FlashCase c{1, 1024, 1, 64};
  const FlashInputs in = test::random_flash_inputs(c, rng);
  const int64_t tt_bytes = c.T * c.T * static_cast<int64_t>(sizeof(float));
  const auto peak_growth = [](const std::function<void()>& body) {
    Allocator& allocator = allocator_for(Device::cpu());
    allocator.reset_peak();
    const int64_t before = allocator.stats().live_total;
    body();
    return allocator.stats().peak_total - before;
  };
  // Outputs allocated up front: only what the ops allocate for themselves is measured.
  const Tensor out = Tensor::empty(in.dout.shape(), DType::F32), lse = Tensor::empty({c.B, c.NH, c.T}, DType::F32);
  const Tensor dqkv = in.dqkv_before.clone();
  const int64_t flash = peak_growth([&] {
    ops::flash_attention_forward(out, lse, in.qkv, static_cast<int>(c.NH));
    ops::flash_attention_backward(dqkv, in.dout, in.qkv, out, lse, static_cast<int>(c.NH));
  });
  const int64_t materialized = peak_growth([&] { test::run_materialized(in, c.NH); });
  set_num_threads(threads);
  EXPECT_LT(flash, tt_bytes / 8) << "the flash forward + backward grew the peak by " << flash << " bytes";
  EXPECT_GE(materialized, tt_bytes);
}

TEST(FlashCpuArguments, BadShapesAndDtypesAreClearErrors) {
  const Tensor qkv = Tensor::zeros({1, 4, 3 * 8}, DType::F32);
  const Tensor out = Tensor::zeros({1, 4, 8}, DType::F32), lse = Tensor::zeros({1, 2, 4}, DType::F32);
  testing::expect_error([&] { ops::flash_attention_forward(out, lse, qkv, 3); }, ErrorKind::InvalidArgument,
                        {"n_head(3)"});
  testing::expect_error(
      [&] {
        ops::flash_attention_forward(out, Tensor::zeros({1, 2, 5}, DType::F32), qkv, 2);
      },
      ErrorKind::InvalidArgument, {"lse"});
  testing::expect_error([&] { ops::flash_attention_forward(out.to_dtype(DType::BF16), lse, qkv, 2); },
                        ErrorKind::InvalidArgument, {"out"});
  testing::expect_error(
      [&] {
        ops::flash_attention_forward(out, lse, Tensor::zeros({1, 4, 24}, DType::I32), 2);
      },
      ErrorKind::InvalidArgument, {"qkv"});
  testing::expect_error([&] { ops::flash_attention_backward(qkv.to_dtype(DType::F16), out, qkv, out, lse, 2); },
                        ErrorKind::InvalidArgument, {"dqkv"});
}

}  // namespace
}  // namespace lab
