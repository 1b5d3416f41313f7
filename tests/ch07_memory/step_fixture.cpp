// The shared model and batches of chapter 7's step tests (see step_fixture.h).
#include "tests/ch07_memory/step_fixture.h"

#include <vector>

#include "common/util/rng.h"

namespace lab::testing {

GPT2Config small_step_config() {
  GPT2Config c;
  c.n_layer = 4;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 96;
  c.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(c.vocab_size));
  return c;
}

MicroBatch step_test_batch(int step, int micro, int64_t global_rows, int64_t first_row, int64_t rows, int64_t seq) {
  Rng rng(977ull * static_cast<uint64_t>(step) + 13ull * static_cast<uint64_t>(micro) + 5ull);
  std::vector<int32_t> tokens(static_cast<size_t>(global_rows * (seq + 1)));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(small_step_config().vocab_size)));
  std::vector<int32_t> x, y;
  for (int64_t r = first_row; r < first_row + rows; ++r)
    for (int64_t t = 0; t < seq; ++t) {
      x.push_back(tokens[static_cast<size_t>(r * (seq + 1) + t)]);
      y.push_back(tokens[static_cast<size_t>(r * (seq + 1) + t + 1)]);
    }
  return {Tensor::from_ints(x, {rows, seq}), Tensor::from_ints(y, {rows, seq})};
}

}  // namespace lab::testing
