// Lab 04 on the CPU: every CPU version of the classifier lab against the CPU reference at odd shapes and with
// logits around 1000; ch06::fused_classifier on the CPU with rows whose maximum comes first, last or rises in
// every chunk of the online pass, with dloss = 0, and with bad arguments. Label ch06.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ch06_single_gpu/fused_classifier.h"
#include "tests/ch06_single_gpu/04_classifier/classifier_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using test::ClassifierCase;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// ================================================================ the lab's CPU versions

class ClassifierLabCpu : public ::testing::TestWithParam<ClassifierCase> {};

TEST_P(ClassifierLabCpu, EveryVersionMatchesTheReference) {
  const kernel_lab::KernelLab lab = ch06::make_classifier_lab(GetParam().problem(test_seed()));
  const std::vector<int> cpu = test::versions_on(lab, DeviceType::CPU);
  ASSERT_EQ(cpu.size(), 4u) << "three-pass, online, the reference, the promoted loop";
  for (const int n : cpu) EXPECT_TRUE(test::version_passes(lab, n));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ClassifierLabCpu, ::testing::ValuesIn(test::classifier_cases()),
                         [](const auto& info) { return info.param.name(); });

// ================================================================ the promoted op

TEST(FusedClassifierCpu, RowsWhoseMaximumMovesMatchTheReference) {
  for (const auto& [V, Vp] : {std::pair<int64_t, int64_t>{50257, 50304}, {3000, 3001}, {1024, 1024}}) {
    const Tensor targets = Tensor::from_ints(std::vector<int32_t>{0, static_cast<int32_t>(V - 1), 7}, {3});
    test::expect_fused_matches_reference(test::shaped_rows(V, Vp), targets, V, 1.0f / 3.0f, Device::cpu());
  }
}

TEST(FusedClassifierCpu, ZeroDlossComputesTheLossesAndLeavesTheLogits) {
  const Tensor targets = Tensor::from_ints(std::vector<int32_t>{5, 0, 999}, {3});
  test::expect_fused_matches_reference(test::shaped_rows(1000, 1003), targets, 1000, 0.0f, Device::cpu());
}

TEST(FusedClassifierCpu, BadArgumentsAreClearErrors) {
  const Tensor logits = Tensor::zeros({2, 8}, DType::F32), losses = Tensor::zeros({2}, DType::F32);
  const Tensor targets = Tensor::from_ints(std::vector<int32_t>{1, 6}, {2});
  testing::expect_error([&] { ch06::fused_classifier(logits, losses, targets, 6, 1.0f); }, ErrorKind::InvalidArgument,
                        {"target 6 at row 1", "[0, 6)"});
  testing::expect_error([&] { ch06::fused_classifier(logits, losses, targets, 9, 1.0f); }, ErrorKind::InvalidArgument,
                        {"vocab 9", "8 logit columns"});
  testing::expect_error([&] { ch06::fused_classifier(logits, Tensor::zeros({3}, DType::F32), targets, 8, 1.0f); },
                        ErrorKind::InvalidArgument, {"losses"});
  testing::expect_error([&] { ch06::fused_classifier(logits, losses, targets.slice_rows(0, 1), 8, 1.0f); },
                        ErrorKind::InvalidArgument, {"1 targets for 2 rows"});
  testing::expect_error([&] { ch06::fused_classifier(logits, losses, losses, 8, 1.0f); }, ErrorKind::InvalidArgument,
                        {"targets"});
}

}  // namespace
}  // namespace lab
