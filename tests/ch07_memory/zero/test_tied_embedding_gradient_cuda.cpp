// ZeRO's tied embedding, its gradient made and reduced in chunks, on CUDA (label cuda: skips without a GPU,
// runs in the emulation build): reassembled, the plain LM head's and lookup's gradients within float rounding
// (cuBLAS on columns of the logits' gradient; the lookup's atomics may add in another order).
#include <gtest/gtest.h>

#include "common/core/error.h"
#include "tests/ch07_memory/zero/tied_embedding_check.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab::ch07 {
namespace {

TEST(TiedEmbeddingGradientCuda, ChunksReassembleThePlainGradients) {
  LAB_REQUIRE_GPU();
  for (const int64_t chunk_rows : {int64_t{1}, int64_t{7}, int64_t{34}}) {
    SCOPED_TRACE(cat(chunk_rows, " rows per rank and chunk"));
    const testing::TiedGradientErrors e = testing::tied_gradient_errors(test::kGpu, chunk_rows);
    EXPECT_LT(e.head_wte, 1e-5);
    EXPECT_LT(e.head_x, 1e-5);
    EXPECT_LT(e.lookup_wte, 1e-5);
    EXPECT_LT(e.lookup_wpe, 1e-5);
  }
}

}  // namespace
}  // namespace lab::ch07
