// The rungs of the memory staircase and their measurement (see memory_staircase.h).
#include "ch07_memory/memory_staircase.h"

#include "common/core/error.h"
#include "common/util/rng.h"

namespace lab::ch07 {

namespace {

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// The largest of every rank's `value`.
double max_over_ranks(comm::Communicator& group, double value, Device device) {
  const Tensor t = Tensor::from_floats(std::vector<float>{static_cast<float>(value)}, {1}, device);
  group.all_reduce(t, comm::ReduceOp::Max);
  return t.item();
}

}  // namespace

std::string setting_or(const staircase::Settings& settings, const std::string& name, const std::string& absent) {
  const auto it = settings.find(name);
  return it == settings.end() ? absent : it->second;
}

int64_t int_setting(const staircase::Settings& settings, const std::string& name) {
  const std::string v = setting_or(settings, name, "");
  LAB_CHECK(!v.empty(), InvalidArgument, "staircase: rung without --", name);
  return std::stoll(v);
}

staircase::Staircase memory_staircase(const MemoryBenchConfig& c) {
  const std::string rows = std::to_string(c.batch), micro_rows = std::to_string(c.batch / c.micro_batches);
  LAB_CHECK(c.micro_batches >= 1 && c.batch % c.micro_batches == 0, InvalidArgument, "--batch ", c.batch,
            " is not a multiple of --micro-batches ", c.micro_batches);
  return {"memory",
          cat("GPT-2 ", c.model, ", ", c.batch, " x ", c.seq,
              " tokens per step, fp32, AdamW without gradient clipping, on ", c.device.str()),
          {"--model", c.model, "--seq", std::to_string(c.seq), "--total-batch-tokens", std::to_string(c.batch * c.seq),
           "--grad-clip", "0"},
          {
              {"original", "one batch, every activation kept", {"--batch", rows}},
              {"accumulation",
               cat(c.micro_batches, " micro-batches of ", micro_rows, " rows, gradients accumulated"),
               {"--batch", micro_rows}},
              {"selective",
               "attention probabilities and GELU recomputed in backward",
               {"--batch", micro_rows, "--recompute", "selective"}},
              {"selective-ln",
               "and the LayerNorms' outputs, recomputed from their inputs (llm.c's recompute=2)",
               {"--batch", micro_rows, "--recompute", "selective-ln"}},
              {"block",
               "only each block's input kept; the block re-run in backward",
               {"--batch", micro_rows, "--recompute", "block"}},
              {"block-one-pass",
               "the whole batch in one pass again, which block recompute leaves room for (the optimizer in "
               "backward cannot accumulate)",
               {"--batch", rows, "--recompute", "block"}},
              {"optimizer-in-backward",
               "each parameter updated as soon as its gradient is final, the gradient freed at once",
               {"--batch", rows, "--recompute", "block", "--optimizer-in-backward"}},
              {"flash-attention",
               "chapter 9's flash attention: no probabilities kept, not even by the block re-run in backward",
               {"--batch", rows, "--recompute", "block", "--optimizer-in-backward", "--attention", "flash"}},
              {"chunked-head",
               "the LM head, its loss and its gradients chunk by chunk in forward: the logits never whole",
               {"--batch", rows, "--recompute", "block", "--optimizer-in-backward", "--attention", "flash", "--lm-head",
                "chunked"}},
          }};
}

MicroBatch random_step_batch(int64_t vocab_size, int64_t rows, int64_t seq, Device device) {
  Rng rng(5);
  std::vector<int32_t> tokens(static_cast<size_t>(rows * seq)), targets(tokens.size());
  for (auto& t : tokens) t = static_cast<int32_t>(rng.below(vocab_size));
  for (auto& t : targets) t = static_cast<int32_t>(rng.below(vocab_size));
  return {Tensor::from_ints(tokens, {rows, seq}, device), Tensor::from_ints(targets, {rows, seq}, device)};
}

BatchSource micro_batches_of(const MicroBatch& step_rows, int64_t micro_rows) {
  const int64_t count = step_rows.inputs.shape()[0] / micro_rows;
  LAB_CHECK(count >= 1 && count * micro_rows == step_rows.inputs.shape()[0], InvalidArgument, "a step of ",
            step_rows.inputs.shape()[0], " rows does not split into micro-batches of ", micro_rows);
  return [step_rows, micro_rows, count, next = int64_t{0}]() mutable {
    const int64_t first = (next++ % count) * micro_rows;
    return MicroBatch{step_rows.inputs.slice_rows(first, first + micro_rows),
                      step_rows.targets.slice_rows(first, first + micro_rows)};
  };
}

std::vector<staircase::Measurement> measure_steps(TrainStep& step, const BatchSource& source, Device device,
                                                  int64_t steps, comm::Communicator& group) {
  step.run(source, 1e-4);  // untimed
  staircase::Measurement ms{"step_ms", "ms", bench::Better::Lower, {}};
  staircase::Measurement total{"peak_MiB", "MiB", bench::Better::Lower, {}};
  staircase::Measurement max_total{"max_rank_peak_MiB", "MiB", bench::Better::Lower, {}};
  std::vector<staircase::Measurement> by_category;
  for (int i = 0; i < kNumMemCategories; ++i)
    by_category.push_back(
        {cat(mem_category_name(static_cast<MemCategory>(i)), "_MiB"), "MiB", bench::Better::Lower, {}});
  for (int64_t s = 0; s < steps; ++s) {
    group.barrier();  // the ranks start each step together, so the slowest rank's time is the step's
    allocator_for(device).reset_peak();
    const TrainStepResult r = step.run(source, 1e-4);
    const MemoryStats stats = memory_stats(device);  // read before the reductions below allocate
    ms.samples.push_back(max_over_ranks(group, r.seconds, device) * 1e3);
    total.samples.push_back(mib(stats.peak_total));
    max_total.samples.push_back(max_over_ranks(group, mib(stats.peak_total), device));
    for (int i = 0; i < kNumMemCategories; ++i)
      by_category[static_cast<size_t>(i)].samples.push_back(mib(stats.peak[i]));
  }
  std::vector<staircase::Measurement> out;
  out.push_back(std::move(total));
  if (group.size() > 1) out.push_back(std::move(max_total));
  for (auto& m : by_category) out.push_back(std::move(m));
  out.push_back(std::move(ms));
  return out;
}

}  // namespace lab::ch07
