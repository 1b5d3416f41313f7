// How the column-sum kernels (column_sums.cuh) divide an [N, C] matrix among thread blocks. Plain C++, so
// tests can check the split without a GPU.
//
// Each block covers 32 columns and one chunk of rows; the chunks are sized so that the grid has about
// kColumnSumBlocks blocks whatever the shape. GPT-2's bias and LayerNorm gradients have few columns
// (C = 768: 24 blocks of 32) and many rows (N = B*T = 8192 and more), so one block per 32 columns would leave
// most of an H100's 132 SMs idle while each thread walked N/16 rows. The split depends only on N and C,
// never on the GPU, so the order of the additions, and the bits of the result, are the same everywhere.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lab::ops::cuda {

inline constexpr int kColumnWidth = 32;  // columns per block: one warp's lanes, so rows are read coalesced
inline constexpr int kColumnRows = 16;   // thread rows per block: 32 x 16 = 512 threads
// About two waves of 512-thread blocks on an H100 (132 SMs x 4 resident blocks = 528 per wave): enough to
// fill the machine, few enough that the second kernel has little to add.
inline constexpr int64_t kColumnSumBlocks = 1024;
// The kernel that reads 16-byte pieces (column_sums.cuh) covers 4 or 8 times the columns per block and keeps
// several loads in flight per thread, so fewer blocks fill the machine: about two per SM of an H100, each thread
// walking 6 (C = 768) to 23 (C = 3072) rows of a GPT-2 gradient at 8 x 1024 tokens, and 22-88 chunks to add.
inline constexpr int64_t kPieceColumnSumBlocks = 264;

struct ColumnSplit {
  int64_t column_blocks;   // blocks of kColumnWidth columns (grid x)
  int64_t row_chunks;      // chunks of rows (grid y): one partial sum per chunk and column
  int64_t rows_per_chunk;  // the last chunk may be shorter
  int64_t blocks() const { return column_blocks * row_chunks; }
};

// For N > 0 rows and C > 0 columns, blocks of `block_columns` columns, about `target_blocks` blocks. Every chunk
// holds at least kColumnRows rows (no idle thread rows) unless N is smaller, and none is empty.
inline ColumnSplit column_split(int64_t N, int64_t C, int64_t block_columns = kColumnWidth,
                                int64_t target_blocks = kColumnSumBlocks) {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t column_blocks = ceil_div(C, block_columns);
  const int64_t wanted = ceil_div(target_blocks, column_blocks);
  const int64_t chunks = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, N / kColumnRows));
  const int64_t rows_per_chunk = ceil_div(N, chunks);
  return {column_blocks, ceil_div(N, rows_per_chunk), rows_per_chunk};
}

}  // namespace lab::ops::cuda
