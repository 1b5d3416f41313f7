// The chunked LM head (ch07_memory/chunked_lm_head.h) against the full one on one device: what the CPU test and its
// CUDA twin share.
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/device.h"
#include "common/core/dtype.h"
#include "common/ops/classifier.h"

namespace lab::test {

struct HeadRun {
  std::vector<float> losses, grads;
  int64_t kept = 0;                // activation bytes the forward left stored for backward
  int64_t wte_gradient_hooks = 0;  // times wte's gradient hook ran
};

struct HeadCase {
  DType matmul = DType::F32;       // the products' operands (GPT2::set_matmul_dtype)
  bool activations_16bit = false;  // ModelOptions::activations = matmul
  ops::ClassifierFn classifier = ops::fused_classifier;
};

// One forward and backward of a tiny GPT-2 (2 blocks, 64 wide, vocabulary 97 padded to 128) over B x T tokens,
// with the full head (chunk_rows 0) or the chunked one in chunks of chunk_rows rows.
HeadRun run_head(Device device, const HeadCase& c, int64_t chunk_rows, int64_t B, int64_t T);

// The chunked head against the full one: losses and flat gradient within `tolerance` (max_scaled_error), wte's hook
// run once either way, fewer bytes kept; at chunk sizes that divide the rows, that do not, of one row, and larger
// than the rows.
void expect_chunked_head_matches_full(Device device, const HeadCase& c, double tolerance);

}  // namespace lab::test
