// --kernels fused on CUDA: the fused GPT-2 on the GPU against the reference GPT-2 on the CPU (logits, losses,
// gradients, also with bf16 and fp16 activations end to end; a few training steps), and the fused residual +
// LayerNorm in 16 bits against the unfused functions, bit for bit. Labels ch06 and cuda: runs in the
// emulation build, skips without a GPU.
#include <gtest/gtest.h>

#include "tests/ch06_single_gpu/fused_model/fused_model_check.h"
#include "tests/ch06_single_gpu/fused_model/residual_layernorm_check.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab {
namespace {

TEST(FusedModelCuda, LogitsLossAndGradientsMatchCpuReference) {
  LAB_REQUIRE_GPU();
  test::expect_fused_matches_reference(test::kGpu);
}

TEST(FusedModelCuda, With16BitActivationsMatchesReference) {
  LAB_REQUIRE_GPU();
  for (const DType dtype : {DType::BF16, DType::F16}) test::expect_fused_matches_reference_in_16bit(test::kGpu, dtype);
}

// The fused CUDA kernels (the core LayerNorm's 16-byte-piece kernels with the add folded in) give the unfused ops'
// bits.
TEST(FusedModelCuda, ResidualLayerNormIn16BitsIsTheUnfusedFunctionsBitForBit) {
  LAB_REQUIRE_GPU();
  for (const DType dtype : {DType::BF16, DType::F16})
    test::expect_residual_layernorm_is_the_unfused_functions(test::kGpu, dtype);
}

TEST(FusedModelCuda, TrainingTracksCpuReference) {
  LAB_REQUIRE_GPU();
  test::expect_fused_training_tracks_reference(test::kGpu);
}

}  // namespace
}  // namespace lab
