// --kernels fused on the CPU: the fused GPT-2's logits, losses and gradients against the reference GPT-2's, a few
// training steps side by side, the same with bf16 matmuls (mixed precision) and with bf16 and fp16 activations end to
// end, the fused residual + LayerNorm in 16 bits against the unfused functions (bit for bit), and the flag's parsing.
// Label ch06.
#include <gtest/gtest.h>

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/fused_model.h"
#include "tests/ch06_single_gpu/fused_model/fused_model_check.h"
#include "tests/ch06_single_gpu/fused_model/residual_layernorm_check.h"

namespace lab {
namespace {

TEST(FusedModelCpu, LogitsLossAndGradientsMatchReference) {
  test::expect_fused_matches_reference(Device::cpu());
}

TEST(FusedModelCpu, WithBf16MatmulsMatchesReference) {
  test::expect_fused_matches_reference(Device::cpu(), DType::BF16);
}

TEST(FusedModelCpu, With16BitActivationsMatchesReference) {
  for (const DType dtype : {DType::BF16, DType::F16})
    test::expect_fused_matches_reference_in_16bit(Device::cpu(), dtype);
}

TEST(FusedModelCpu, ResidualLayerNormIn16BitsIsTheUnfusedFunctionsBitForBit) {
  for (const DType dtype : {DType::BF16, DType::F16})
    test::expect_residual_layernorm_is_the_unfused_functions(Device::cpu(), dtype);
}

TEST(FusedModelCpu, TrainingTracksReference) {
  test::expect_fused_training_tracks_reference(Device::cpu());
}

TEST(FusedModelCpu, HooksSetOnlyWhenFused) {
  const ModelOptions reference = ch06::with_kernels({}, ch06::Kernels::Reference);
  EXPECT_FALSE(reference.block);
  EXPECT_FALSE(reference.mlp);
  EXPECT_EQ(reference.classifier, &ops::fused_classifier);
  const ModelOptions fused = ch06::with_kernels({}, ch06::Kernels::Fused);
  EXPECT_TRUE(fused.block);
  EXPECT_TRUE(fused.mlp);
  EXPECT_EQ(fused.classifier, &ch06::fused_classifier);
}

TEST(FusedModelCpu, KernelsNames) {
  EXPECT_EQ(ch06::parse_kernels("reference"), ch06::Kernels::Reference);
  EXPECT_EQ(ch06::parse_kernels("fused"), ch06::Kernels::Fused);
  EXPECT_STREQ(ch06::kernels_name(ch06::Kernels::Fused), "fused");
  try {
    ch06::parse_kernels("fastest");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("reference or fused"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lab
