// ZeRO's tied embedding, its gradient made and reduced in chunks (zero/tied_embedding_gradient.h), on the CPU:
// reassembled from 3 simulated ranks' chunks it is the plain LM head's and lookup's gradient of wte, in one
// chunk or in many (the last ones partly padding), and the input's and wpe's gradients are theirs too.
#include <gtest/gtest.h>

#include "common/core/error.h"
#include "tests/ch07_memory/zero/tied_embedding_check.h"

namespace lab::ch07 {
namespace {

TEST(TiedEmbeddingGradient, ChunksReassembleThePlainGradientsOnTheCpu) {
  for (const int64_t chunk_rows : {int64_t{1}, int64_t{7}, int64_t{34}}) {
    SCOPED_TRACE(cat(chunk_rows, " rows per rank and chunk"));
    const testing::TiedGradientErrors e = testing::tied_gradient_errors(Device::cpu(), chunk_rows);
    EXPECT_LT(e.head_wte, 1e-5);
    EXPECT_LT(e.head_x, 1e-5);
    EXPECT_EQ(e.lookup_wte, 0.0);  // the same additions in the same order
    EXPECT_EQ(e.lookup_wpe, 0.0);
    EXPECT_EQ(e.chunks, 2 * ((34 + chunk_rows - 1) / chunk_rows));  // 34 rows per rank, head and lookup
  }
}

}  // namespace
}  // namespace lab::ch07
