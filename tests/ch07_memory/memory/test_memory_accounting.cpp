// What chapter 7's memory figures rest on: the tape lists every activation the forward keeps (its entries'
// bytes add up to the allocator's live activation bytes), parameters, gradients and AdamW's moments are exactly
// the theory, the stored activations match the per-token formula, and a snapshot's events replay to the
// allocator's own live and peak bytes.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ch07_memory/memory_report.h"
#include "ch07_memory/memory_snapshot.h"
#include "ch07_memory/memory_theory.h"
#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

MicroBatch random_batch(const GPT2Config& config, int64_t batch, int64_t seq, uint64_t seed) {
  Rng rng(seed);
  return {test::random_ids({batch, seq}, rng, config.vocab_size),
          test::random_ids({batch, seq}, rng, config.vocab_size)};
}

TEST(MemoryAccounting, TapeEntriesAddUpToTheLiveActivations) {
  const GPT2Config config = GPT2Config::from_name("tiny");
  GPT2 model(config, Device::cpu());
  model.init_weights(1);
  const MicroBatch b = random_batch(config, 2, 16, 5);
  const int64_t before = memory_stats(Device::cpu()).live_of(MemCategory::Activations);
  Tape tape;
  const Tensor losses = model.loss(tape, b.inputs, b.targets);
  int64_t kept = 0;
  std::set<std::string> ops;
  for (const TapeEntry& e : tape.entries()) {
    kept += e.kept_bytes;
    ops.insert(e.op);
  }
  // Everything the forward allocated is kept by the tape, except the losses it returned.
  EXPECT_EQ(kept + static_cast<int64_t>(losses.nbytes()),
            memory_stats(Device::cpu()).live_of(MemCategory::Activations) - before);
  for (const char* op : {"embedding", "layernorm", "linear", "attention", "gelu", "residual"})
    EXPECT_TRUE(ops.count(op)) << op;
  tape.backward();
  EXPECT_TRUE(tape.entries().empty());
}

TEST(MemoryAccounting, ParamsGradsAndMomentsAreTheTheoryExactly) {
  const GPT2Config config = GPT2Config::from_name("tiny");
  const MemoryStats before = memory_stats(Device::cpu());
  GPT2 model(config, Device::cpu());
  AdamW optimizer(model.parameters(), {});
  const MemoryStats after = memory_stats(Device::cpu());
  const ch07::MemoryTheory theory = ch07::memory_theory(config, 2, 16, ch07::RecomputePolicy::None);
  for (const MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer})
    EXPECT_EQ(after.live_of(c) - before.live_of(c), theory.of(c)) << mem_category_name(c);
  // Mixed precision adds the matmuls' 16-bit copy of every parameter, and nothing else.
  model.set_matmul_dtype(DType::BF16);
  const MemoryStats mixed = memory_stats(Device::cpu());
  const ch07::MemoryTheory mixed_theory =
      ch07::memory_theory(config, 2, 16, ch07::RecomputePolicy::None, 4, ch07::AttentionKept::Probabilities, 0, 2);
  for (const MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer})
    EXPECT_EQ(mixed.live_of(c) - before.live_of(c), mixed_theory.of(c)) << mem_category_name(c);
  EXPECT_EQ(mixed_theory.of(MemCategory::Params), theory.of(MemCategory::Params) * 3 / 2);
}

TEST(MemoryAccounting, StoredActivationsAreTheFormula) {
  // After the forward, before backward: the activations kept are the formula's, for each recompute policy.
  const GPT2Config config = GPT2Config::from_name("tiny");
  for (const auto policy : ch07::recompute_policies()) {
    SCOPED_TRACE(ch07::recompute_policy_name(policy));
    ModelOptions options;
    ch07::apply_recompute(options, policy);
    GPT2 model(config, Device::cpu(), options);
    model.init_weights(1);
    const int64_t B = 2, T = 16;
    const MicroBatch b = random_batch(config, B, T, 6);
    const int64_t before = memory_stats(Device::cpu()).live_of(MemCategory::Activations);
    Tape tape;
    const Tensor losses = model.loss(tape, b.inputs, b.targets);
    const int64_t stored = memory_stats(Device::cpu()).live_of(MemCategory::Activations) - before;
    EXPECT_EQ(stored, ch07::memory_theory(config, B, T, policy).of(MemCategory::Activations));
  }
}

TEST(MemoryAccounting, SnapshotReplaysToTheAllocatorsFigures) {
  const GPT2Config config = GPT2Config::from_name("tiny");
  GPT2 model(config, Device::cpu());
  model.init_weights(2);
  AdamW optimizer(model.parameters(), {});
  TrainStep step(model, optimizer, TrainStepConfig{2, 1.0, false});
  const MicroBatch b = random_batch(config, 2, 16, 7);
  const BatchSource source = [&] { return b; };
  step.run(source, 1e-3);  // the first step: whatever is allocated once is allocated
  ch07::MemorySnapshot snapshot(Device::cpu());
  snapshot.start();
  step.run(source, 1e-3);
  snapshot.stop();
  const MemoryStats stats = memory_stats(Device::cpu());

  EXPECT_EQ(snapshot.replayed_peak(), snapshot.allocator_peak());
  EXPECT_EQ(snapshot.allocator_peak(), stats.peak_total);
  // Per category, the start plus the events is what is live now; a steady step allocates what it frees.
  std::array<int64_t, kNumMemCategories> live = snapshot.start_live();
  int64_t allocated = 0, freed = 0;
  std::map<uint64_t, int64_t> open;  // address -> bytes of allocations not yet freed
  for (const ch07::MemorySnapshot::Event& e : snapshot.events()) {
    live[static_cast<int>(e.category)] += e.is_alloc ? e.bytes : -e.bytes;
    (e.is_alloc ? allocated : freed) += e.bytes;
    if (e.is_alloc) {
      EXPECT_FALSE(open.count(e.address)) << "an address handed out twice";
      open[e.address] = e.bytes;
    } else if (open.count(e.address)) {
      EXPECT_EQ(open[e.address], e.bytes);
      open.erase(e.address);
    }
  }
  for (int i = 0; i < kNumMemCategories; ++i) EXPECT_EQ(live[i], stats.live[i]) << i;
  EXPECT_EQ(allocated, freed);
  EXPECT_GT(allocated, 0);
  std::set<std::string> ops(snapshot.ops().begin(), snapshot.ops().end());
  for (const char* op : {"linear", "linear.backward", "attention", "attention.backward"})
    EXPECT_TRUE(ops.count(op)) << op;

  const Json j = Json::parse(snapshot.to_json().dump());
  EXPECT_EQ(j.at("events").size(), snapshot.events().size());
  EXPECT_EQ(j.at("allocator_peak").as_int(), stats.peak_total);
}

TEST(MemoryAccounting, ReportShowsEveryCategoryAndTheResidentAccount) {
  MemoryStats stats;
  stats.live[static_cast<int>(MemCategory::Params)] = 4 << 20;
  stats.peak[static_cast<int>(MemCategory::Params)] = 4 << 20;
  stats.peak_total = stats.live_total = 4 << 20;
  stats.peak_reserved = 5 << 20;
  const ch07::MemoryTheory theory =
      ch07::memory_theory(GPT2Config::from_name("tiny"), 1, 8, ch07::RecomputePolicy::None);
  const std::string text = ch07::memory_report(stats, theory, {0, 9 << 20});
  EXPECT_NE(text.find("params"), std::string::npos);
  EXPECT_NE(text.find("cache and rounding 1.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("outside the allocator 4.0 MiB"), std::string::npos) << text;
  const Json peaks = ch07::peak_by_category_json(stats);
  for (const char* key : {"params", "grads", "optimizer", "activations", "workspace", "comm"})
    EXPECT_TRUE(peaks.contains(key)) << key;
  EXPECT_EQ(peaks.at("params").as_int(), 4 << 20);
}

}  // namespace
}  // namespace lab
