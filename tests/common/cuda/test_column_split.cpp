// How the column-sum kernels split an [N, C] matrix (common/ops/cuda/column_split.h): plain arithmetic,
// checked on every machine. The sums themselves are checked against the CPU in test_ops.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/ops/cuda/column_split.h"

namespace lab {
namespace {

using ops::cuda::column_split;
using ops::cuda::ColumnSplit;
using ops::cuda::kColumnRows;
using ops::cuda::kColumnWidth;

// The shapes of GPT-2 d12's bias and LayerNorm gradients at 8 x 1024 tokens (C = 768, the attention
// projection 2304, the MLP 3072): one block per 32 columns would give 24 to 96 blocks, a fraction of an H100's
// 132 SMs. The split must fill every SM with as many 512-thread blocks as it holds at once (a full wave),
// without so many chunks that the second kernel has much to add.
TEST(ColumnSplit, FillsAnH100AtGpt2Shapes) {
  constexpr int64_t kH100Sms = 132, kResidentBlocksPerSm = 4;  // 2048 threads per SM / 512 per block
  for (const int64_t C : {int64_t{768}, int64_t{2304}, int64_t{3072}}) {
    const ColumnSplit split = column_split(8 * 1024, C);
    EXPECT_GE(split.blocks(), kH100Sms * kResidentBlocksPerSm) << "C = " << C;
    EXPECT_LE(split.blocks(), 2 * ops::cuda::kColumnSumBlocks) << "C = " << C;
  }
}

// Every row in exactly one chunk, no empty chunk, every column in a block, for shapes small and large.
TEST(ColumnSplit, CoversEveryRowAndColumnOnce) {
  for (const int64_t N : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1000}, int64_t{4099},
                          int64_t{65536}, int64_t{1} << 22}) {
    for (const int64_t C : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{768}, int64_t{50304}}) {
      const ColumnSplit s = column_split(N, C);
      EXPECT_GE(s.row_chunks, 1);
      EXPECT_LE(s.row_chunks, 65535) << "grid y limit";
      EXPECT_GE(s.column_blocks * kColumnWidth, C);
      EXPECT_LT((s.column_blocks - 1) * kColumnWidth, C);
      EXPECT_GE(s.row_chunks * s.rows_per_chunk, N) << N << " x " << C;
      EXPECT_LT((s.row_chunks - 1) * s.rows_per_chunk, N) << "an empty last chunk, " << N << " x " << C;
      if (N >= kColumnRows) {
        EXPECT_GE(s.rows_per_chunk, kColumnRows) << "idle thread rows, " << N << " x " << C;
      }
    }
  }
}

}  // namespace
}  // namespace lab
