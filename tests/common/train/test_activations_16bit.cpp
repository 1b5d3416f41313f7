// 16-bit activations end to end (ModelOptions::activations) on the CPU: against the same model with fp32 activations,
// in bf16 and f16 (activations_16bit_cases.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/nn/gpt2.h"
#include "tests/common/expect_error.h"
#include "tests/common/train/activations_16bit_cases.h"

namespace lab {
namespace {

class Activations16Bit : public ::testing::TestWithParam<DType> {};

TEST_P(Activations16Bit, GradientsMatchFp32ActivationsWithEachAttention) {
  for (const char* attention : {"materialized", "batched", "flash"})
    test::expect_gradients_match_fp32_activations(GetParam(), Device::cpu(), attention);
}

TEST_P(Activations16Bit, TrainingFollowsFp32Activations) {
  test::expect_training_follows_fp32_activations(GetParam(), Device::cpu(), 10);
}

TEST_P(Activations16Bit, ActivationsTakeHalfTheBytes) {
  test::expect_activations_take_half_the_bytes(GetParam(), Device::cpu());
}

TEST_P(Activations16Bit, NothingIsConvertedBetweenOps) {
  test::expect_no_conversion_between_ops(GetParam(), Device::cpu());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Activations16Bit, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Activations16BitModel, NeedTheSame16BitMatmuls) {
  ModelOptions options;
  options.activations = DType::BF16;
  GPT2 model(GPT2Config::from_name("tiny"), Device::cpu(), options);
  const Tensor tokens = Tensor::from_ints(std::vector<int32_t>{1, 2, 3}, {1, 3});
  Tape tape(false);
  testing::expect_error([&] { model.logits(tape, tokens); }, ErrorKind::InvalidArgument,
                        {"bf16 activations needs bf16 matmuls", "not f32"});
}

}  // namespace
}  // namespace lab
