// The chunked LM head on CUDA (the emulation build runs it without a GPU): the full head's losses and gradients on
// the same device in fp32 (TF32 off), under bf16 matmuls and activations, and with chapter 6's classifier.
#include <gtest/gtest.h>

#include "ch06_single_gpu/fused_classifier.h"
#include "tests/ch07_memory/lm_head/lm_head_check.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab {
namespace {

TEST(ChunkedLmHeadCuda, MatchesTheFullHead) {
  LAB_REQUIRE_GPU();
  test::expect_chunked_head_matches_full(test::kGpu, {}, 1e-5);
  test::expect_chunked_head_matches_full(test::kGpu, {DType::BF16, true}, 1e-4);
  test::expect_chunked_head_matches_full(test::kGpu, {DType::F32, false, ch06::fused_classifier}, 1e-5);
}

}  // namespace
}  // namespace lab
