// The number of micro-batches of an accumulated step (see gradient_accumulation.h).
#include "ch07_memory/gradient_accumulation.h"

#include "common/core/error.h"

namespace lab::ch07 {

int64_t micro_batches_per_step(int64_t total_batch_tokens, int64_t micro_batch_rows, int64_t seq, int64_t ranks) {
  LAB_CHECK(micro_batch_rows > 0 && seq > 0 && ranks > 0, InvalidArgument, "micro-batch of ", micro_batch_rows, " x ",
            seq, " tokens on ", ranks, " ranks");
  if (total_batch_tokens == 0) return 1;
  const int64_t micro_tokens = micro_batch_rows * seq * ranks;
  LAB_CHECK(total_batch_tokens > 0 && total_batch_tokens % micro_tokens == 0, InvalidArgument, "--total-batch-tokens ",
            total_batch_tokens, " is not a multiple of --batch x --seq x dp = ", micro_batch_rows, " x ", seq, " x ",
            ranks, " = ", micro_tokens);
  return total_batch_tokens / micro_tokens;
}

}  // namespace lab::ch07
