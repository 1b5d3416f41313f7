// The tiny runs and their comparison (see dp_test_support.h).
#include "tests/ch08_distributed/dp_test_support.h"

#include <cmath>

#include "common/util/rng.h"
#include "tests/ch08_distributed/layout_runs.h"
#include "tests/support/test_support.h"

namespace lab::testing {

GPT2Config dp_test_config() {
  return layout_test_config();
}

std::vector<MicroBatch> global_micro_batches(const DpRunSettings& s, int ranks) {
  Rng rng(s.seed * 31 + 1);
  std::vector<MicroBatch> batches;
  for (int64_t i = 0; i < s.steps * s.accum_steps; ++i)
    batches.push_back({test::random_ids({ranks * s.rows, s.seq}, rng, dp_test_config().vocab_size),
                       test::random_ids({ranks * s.rows, s.seq}, rng, dp_test_config().vocab_size)});
  return batches;
}

MicroBatch share_of(const MicroBatch& global, int rank, int64_t rows) {
  return {global.inputs.slice_rows(rank * rows, (rank + 1) * rows),
          global.targets.slice_rows(rank * rows, (rank + 1) * rows)};
}

DpRunResult train_small(const DpRunSettings& s, const std::vector<MicroBatch>& batches,
                        const std::function<std::unique_ptr<TrainStep>(GPT2&, AdamW&, TrainStepConfig)>& make_step,
                        const std::function<void(const TrainStep&)>& inspect) {
  GPT2 model(dp_test_config(), Device::cpu());
  model.init_weights(s.seed);
  AdamW optimizer(model.parameters(), AdamWConfig{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-3f, .weight_decay = 0.1f});
  const std::unique_ptr<TrainStep> step = make_step(model, optimizer, {s.accum_steps, s.grad_clip, false});
  DpRunResult result;
  size_t next = 0;
  for (int64_t i = 0; i < s.steps; ++i) {
    const TrainStepResult r = step->run([&] { return batches.at(next++); }, 3e-3);
    result.losses.push_back(r.loss);
    result.grad_norms.push_back(r.grad_norm);
  }
  result.params = model.parameters().params().to_floats();
  if (inspect) inspect(*step);
  return result;
}

void expect_same_run(const DpRunResult& got, const DpRunResult& reference, const std::string& what) {
  ASSERT_EQ(got.losses.size(), reference.losses.size()) << what;
  for (size_t i = 0; i < got.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], reference.losses[i], 1e-5 * std::fabs(reference.losses[i])) << what << ", step " << i;
    EXPECT_NEAR(got.grad_norms[i], reference.grad_norms[i], 1e-5 * std::fabs(reference.grad_norms[i]))
        << what << ", step " << i;
  }
  // The parameters: one process and the layout sum the same gradients in different orders (fp32 rounding of
  // about 1e-7 relative), and a few AdamW steps of size lr carry that into the weights.
  ASSERT_EQ(got.params.size(), reference.params.size()) << what;
  size_t bad = 0, worst_at = 0;
  double worst = 0;
  for (size_t i = 0; i < got.params.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got.params[i]) - reference.params[i]);
    const double allowed = 1e-6 + 1e-5 * std::fabs(reference.params[i]);
    if (diff > allowed) ++bad;
    if (diff > worst) {
      worst = diff;
      worst_at = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " parameters outside the tolerance; worst at flat index " << worst_at
                     << ": " << got.params[worst_at] << " vs " << reference.params[worst_at];
}

}  // namespace lab::testing
