// The model's rungs composed (ch10_gpt2/model_rungs.h), on the CPU: every combination of --kernels, --attention and
// --recompute that can run together gives the plain model's losses and gradients (each rung changes only the
// rounding: fused kernels and flash attention add in other orders), in fp32 and in bf16, the chunked head in its
// default chunks and in chunks of 7 rows; those that cannot refuse with their line; the flags' values parse and
// print back. (That block recompute wraps the block installed
// before it: tests/ch07_memory/recompute.)
#include <gtest/gtest.h>

#include "ch10_gpt2/model_rungs.h"
#include "tests/ch10_gpt2/model_rungs_check.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

TEST(ModelRungs, EveryCompatibleCombinationGivesThePlainModelsLossesAndGradients) {
  test::expect_every_compatible_combination_matches_the_plain_model(Device::cpu(), DType::F32, 1e-4);
}

TEST(ModelRungs, EveryCompatibleCombinationInBf16) {
  // Mixed precision: the 16-bit products round the same operands whatever the rungs, but flash attention rounds
  // qkv to bf16 too and the fused kernels add in other orders: bf16's 2^-8, a few times.
  test::expect_every_compatible_combination_matches_the_plain_model(Device::cpu(), DType::BF16, 3e-2);
}

TEST(ModelRungs, EveryCompatibleCombinationWith16BitActivations) {
  // Against the plain bf16 model with fp32 activations: every activation rounded to bf16 as well, over two blocks.
  test::expect_every_compatible_combination_matches_the_plain_model(Device::cpu(), DType::BF16, 5e-2, true);
}

TEST(ModelRungs, NamesParseAndPrintBack) {
  const ModelRungs rungs = ModelRungs::parse("fused", "flash", "block");
  EXPECT_EQ(rungs.str(), "--kernels fused --attention flash --recompute block");
  EXPECT_THROW(ModelRungs::parse("fast", "flash", "none"), Error);
  EXPECT_THROW(ModelRungs::parse("fused", "fast", "none"), Error);
  EXPECT_THROW(ModelRungs::parse("fused", "flash", "some"), Error);
  EXPECT_TRUE(ModelRungs::parse("fused", "flash", "selective").incompatibility().empty());
  EXPECT_TRUE(ModelRungs::parse("reference", "flash", "selective").incompatibility().empty());
  EXPECT_FALSE(ModelRungs::parse("reference", "batched", "selective").incompatibility().empty());
  EXPECT_EQ(ModelRungs::parse("fused", "flash", "block", "16bit").str(),
            "--kernels fused --attention flash --recompute block --activations 16bit");
  EXPECT_THROW(ModelRungs::parse("fused", "flash", "none", "8bit"), Error);
  EXPECT_TRUE(ModelRungs::parse("fused", "materialized", "selective", "16bit").incompatibility().empty());
  EXPECT_FALSE(ModelRungs::parse("fused", "batched", "selective", "16bit").incompatibility().empty());
  ModelOptions options;
  EXPECT_THROW(ModelRungs::parse("reference", "flash", "none", "16bit").apply(options, DType::F32), Error);
  EXPECT_EQ(ModelRungs::parse("fused", "flash", "none", "fp32", "chunked", 256).str(),
            "--kernels fused --attention flash --recompute none --lm-head chunked --lm-head-rows 256");
  testing::expect_error([] { ModelRungs::parse("fused", "flash", "none", "fp32", "full", 256); },
                        ErrorKind::InvalidArgument, {"--lm-head-rows 256", "--lm-head chunked"});
  testing::expect_error([] { ModelRungs::parse("fused", "flash", "none", "fp32", "chunked", -1); },
                        ErrorKind::InvalidArgument, {"--lm-head-rows", ">= 0"});
}

}  // namespace
}  // namespace lab
