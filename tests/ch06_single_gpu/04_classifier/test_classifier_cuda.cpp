// Lab 04 on the GPU: every GPU version of the classifier lab (v1-v6) against the CPU reference at odd shapes and
// with logits around 1000, and the ones that read 16-bit logits in bf16 and f16; ch06::fused_classifier on CUDA with
// rows whose maximum moves, with rows that are not 16-byte aligned (the core's kernel), with dloss = 0, with a target
// outside the vocabulary (a NaN row, nothing else touched), and with bf16 and f16 logits against the f32 CPU op (within
// one ulp: ops_16bit_cases.h). Labels ch06 and cuda: they run in the emulation build and skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ch06_single_gpu/fused_classifier.h"
#include "common/ops/classifier.h"
#include "tests/ch06_single_gpu/04_classifier/classifier_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/ops/ops_16bit_cases.h"
#include "tests/support/op_check.h"

namespace lab {
namespace {

using test::ClassifierCase;
using test::kGpu;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// ================================================================ the lab's GPU versions

class ClassifierLabGpu : public ::testing::TestWithParam<ClassifierCase> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(ClassifierLabGpu, EveryVersionMatchesCpu) {
  const kernel_lab::KernelLab lab = ch06::make_classifier_lab(GetParam().problem(test_seed()));
  const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
  ASSERT_EQ(gpu.size(), 6u) << "v1-v6";
  for (const int n : gpu) EXPECT_TRUE(test::version_passes(lab, n));
}

// The lab with 16-bit logits: v3, v5 and v6 read them (the others are left out) and each gradient is within one ulp of
// the f32 reference's on the same values. GPT-2's row (100.6 KB in 16 bits) is one v6 keeps in shared memory; 70008
// logits (140 KB) are past it, so v6 runs v5 there; both past a piece straddling the vocabulary's end.
TEST(ClassifierLabGpu16, TheVersionsThatRead16BitLogitsMatchCpu) {
  LAB_REQUIRE_GPU();
  for (const DType dtype : {DType::BF16, DType::F16}) {
    for (const ClassifierCase& c : {ClassifierCase{3, 50257, 50304, 0}, ClassifierCase{2, 70001, 70008, 0},
                                    ClassifierCase{5, 1001, 1008, 0}, ClassifierCase{4, 1025, 1032, 1000}}) {
      ch06::ClassifierProblem p = c.problem(test_seed());
      p.dtype = dtype;
      const kernel_lab::KernelLab lab = ch06::make_classifier_lab(p);
      const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
      ASSERT_EQ(gpu.size(), 6u) << "v1-v6, some left out";
      for (const int n : gpu) {
        const bool reads_16bit = n == 3 || n == 5 || n == 6;
        EXPECT_EQ(lab.report_of(n).left_out.empty(), reads_16bit) << "v" << n;
        if (reads_16bit) {
          EXPECT_TRUE(test::version_passes(lab, n)) << dtype_name(dtype) << " " << c.name() << " v" << n;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ClassifierLabGpu, ::testing::ValuesIn(test::classifier_cases()),
                         [](const auto& info) { return info.param.name(); });

// ================================================================ the promoted op

TEST(FusedClassifierGpu, RowsWhoseMaximumMovesMatchCpu) {
  LAB_REQUIRE_GPU();
  for (const auto& [V, Vp] : {std::pair<int64_t, int64_t>{50257, 50304}, {3001, 3001}, {1022, 1024}}) {
    const Tensor targets = Tensor::from_ints(std::vector<int32_t>{0, static_cast<int32_t>(V - 1), 7}, {3});
    test::expect_fused_matches_reference(test::shaped_rows(V, Vp), targets, V, 1.0f / 3.0f, kGpu);
  }
}

TEST(FusedClassifierGpu, ZeroDlossComputesTheLossesAndLeavesTheLogits) {
  LAB_REQUIRE_GPU();
  const Tensor targets = Tensor::from_ints(std::vector<int32_t>{5, 0, 999}, {3});
  test::expect_fused_matches_reference(test::shaped_rows(1000, 1004), targets, 1000, 0.0f, kGpu);
}

// Rows of a view one float into its buffer are not 16-byte aligned: the op must take the scalar kernel, not
// fault or read across rows.
TEST(FusedClassifierGpu, UnalignedRowsMatchCpu) {
  LAB_REQUIRE_GPU();
  const int64_t N = 3, V = 1001, Vp = 1004;
  const Tensor logits = test::shaped_rows(V, Vp);
  const Tensor buffer = Tensor::empty({N * Vp + 1}, DType::F32, kGpu);
  const Tensor x = buffer.view(1, {N, Vp});
  x.copy_from(logits);
  const Tensor targets = Tensor::from_ints(std::vector<int32_t>{3, 1000, 0}, {N});
  const Tensor losses = Tensor::empty({N}, DType::F32, kGpu);
  ch06::fused_classifier(x, losses, targets.to(kGpu), V, 0.5f);
  Tensor expected = logits.clone();
  const Tensor expected_losses = Tensor::empty({N}, DType::F32);
  ops::cpu::fused_classifier(expected, expected_losses, targets, V, 0.5f);
  EXPECT_TRUE(test::all_close("losses", losses, expected_losses, tolerance_for_offset(DType::F32, V, 1010.0)));
  EXPECT_TRUE(test::all_close("dlogits", x, expected, test::gradient_tolerance(V)));
}

// The CUDA op does not check targets (a host synchronisation): a bad one gives that row a NaN loss and a NaN
// gradient over the real columns, and leaves every other row as with good targets.
TEST(FusedClassifierGpu, TargetOutsideTheVocabularyGivesANanRowOnly) {
  LAB_REQUIRE_GPU();
  const int64_t N = 3, V = 1000, Vp = 1024;
  const Tensor logits = test::shaped_rows(V, Vp);
  const Tensor x = logits.to(kGpu), losses = Tensor::empty({N}, DType::F32, kGpu);
  ch06::fused_classifier(x, losses, Tensor::from_ints(std::vector<int32_t>{4, static_cast<int32_t>(V), 0}, {N}, kGpu),
                         V, 1.0f);
  Tensor expected = logits.clone();
  const Tensor expected_losses = Tensor::empty({N}, DType::F32);
  ops::cpu::fused_classifier(expected, expected_losses, Tensor::from_ints(std::vector<int32_t>{4, 0, 0}, {N}), V, 1.0f);
  const std::vector<float> loss = losses.to_floats(), grad = x.to_floats(), want = expected.to_floats();
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_FALSE(std::isnan(loss[0]) || std::isnan(loss[2]));
  for (int64_t v = 0; v < Vp; ++v) {
    const float g = grad[static_cast<size_t>(Vp + v)];
    if (v < V)
      EXPECT_TRUE(std::isnan(g)) << "column " << v;
    else
      EXPECT_EQ(g, 0.0f) << "padding column " << v;
  }
  for (const int64_t n : {int64_t{0}, int64_t{2}})
    EXPECT_TRUE(test::all_close("other rows", x.slice_rows(n, n + 1), expected.slice_rows(n, n + 1),
                                test::gradient_tolerance(V)));
}

// 16-bit logits: {N, vocab, Vp} with rows of whole 16-byte pieces (8 logits) and a piece straddling the end of the
// vocabulary; rows longer than the 1024 threads keep in registers at f32 and 16 bits (Vp > 8 x 1024 x 8, the
// pieces past those read again); Vp off a whole piece (the core's kernel); GPT-2's padded vocabulary. Logits
// around 100 too (only a kernel that subtracts the row's maximum survives exp), and dloss = 0.
class FusedClassifier16BitGpu : public ::testing::TestWithParam<test::Storage16> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(FusedClassifier16BitGpu, MatchesF32) {
  Rng rng(test_seed());
  for (auto [N, vocab, Vp] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 8},
                              {3, 1001, 1008},
                              {2, 70001, 70008},
                              {3, 513, 514},
                              {3, 50257, 50304}}) {
    for (const float offset : {0.0f, 100.0f})
      test::expect_classifier_matches_f32(GetParam().dtype, kGpu, N, vocab, Vp, offset, 1.0f / N, rng,
                                          ch06::fused_classifier);
    test::expect_classifier_matches_f32(GetParam().dtype, kGpu, N, vocab, Vp, 0.0f, 0.0f, rng, ch06::fused_classifier);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedClassifier16BitGpu, test::storage16_values(), test::storage16_name);

}  // namespace
}  // namespace lab
