// The largest-micro-batch search: byte sizes as users write them, the search on peaks of known shape (never
// measuring a micro-batch predicted over the budget), and on a real training step, whose answer must fit when
// measured again and whose next micro-batch must not.
#include <gtest/gtest.h>

#include "ch07_memory/max_batch.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"

namespace lab {
namespace {

TEST(MaxBatch, ByteSizes) {
  EXPECT_EQ(ch07::parse_byte_size("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(ch07::parse_byte_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(ch07::parse_byte_size("1.5KiB"), 1536);
  EXPECT_EQ(ch07::parse_byte_size("8GB"), int64_t{8'000'000'000});
  EXPECT_EQ(ch07::parse_byte_size("1000"), 1000);
  for (const char* bad : {"", "GiB", "8 GiB", "8gib", "-1MiB", "0", "8TiB"})
    EXPECT_THROW(ch07::parse_byte_size(bad), Error) << bad;
}

TEST(MaxBatch, AffinePeaksGiveTheExactAnswerWithoutGoingOver) {
  const int64_t fixed = 1000, per_row = 37, budget = 5000;
  std::vector<int64_t> measured;
  const ch07::MaxBatchSearch s = ch07::find_max_batch(
      [&](int64_t rows) {
        measured.push_back(rows);
        return fixed + rows * per_row;
      },
      budget, 1 << 20);
  EXPECT_EQ(s.rows, (budget - fixed) / per_row);
  EXPECT_EQ(s.peak_bytes, fixed + s.rows * per_row);
  EXPECT_GT(s.next_predicted, budget);
  for (const int64_t rows : measured) EXPECT_LE(fixed + rows * per_row, budget) << rows;
}

TEST(MaxBatch, StepsDownWhenTheMeasurementExceedsThePrediction) {
  // A workspace that appears above 100 rows: the prediction from 1 and 2 rows overshoots, the search steps down.
  const auto peak = [](int64_t rows) { return 1000 + rows * 10 + (rows > 100 ? 500 : 0); };
  const ch07::MaxBatchSearch s = ch07::find_max_batch(peak, 2100, 1 << 20);
  EXPECT_EQ(s.rows, 100);
  EXPECT_LE(s.peak_bytes, 2100);
}

TEST(MaxBatch, NothingFitsAndTheRowLimit) {
  EXPECT_EQ(ch07::find_max_batch([](int64_t rows) { return 100 * rows + 1000; }, 999, 64).rows, 0);
  EXPECT_EQ(ch07::find_max_batch([](int64_t rows) { return rows; }, 1 << 20, 64).rows, 64);
}

TEST(MaxBatch, OnATrainingStepTheAnswerFitsAndOneMoreRowDoesNot) {
  GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  model.init_weights(1);
  AdamW optimizer(model.parameters(), {});
  TrainStep step(model, optimizer, TrainStepConfig{1, 1.0, false});
  const std::vector<float> before = model.parameters().params().to_floats();
  const int64_t seq = 16;
  // A budget a few rows above the fixed part: the step's params, grads and moments plus the first rows.
  const int64_t one_row = ch07::find_max_batch(step, seq, int64_t{1} << 40, 1).peak_bytes;
  const int64_t budget = one_row + 3 * (one_row - memory_stats(Device::cpu()).live_total) + 1;
  const ch07::MaxBatchSearch s = ch07::find_max_batch(step, seq, budget, 1 << 10);
  ASSERT_GE(s.rows, 1);
  EXPECT_LE(ch07::find_max_batch(step, seq, int64_t{1} << 40, s.rows).peak_bytes, budget);  // measured again
  const ch07::MaxBatchSearch more = ch07::find_max_batch(step, seq, int64_t{1} << 40, s.rows + 1);
  EXPECT_GT(more.peak_bytes, budget);
  EXPECT_EQ(model.parameters().params().to_floats(), before);  // learning rate 0: the weights did not move
}

}  // namespace
}  // namespace lab
