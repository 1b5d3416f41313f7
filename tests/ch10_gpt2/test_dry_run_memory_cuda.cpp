// The emulator's dry run (common/cuda/emulation/dry_run.h) makes the same allocations as the real run: two
// training steps of a tiny GPT-2 on emulated CUDA, each rung's configuration once run and once dry, give the same
// sequence of allocations and frees (bytes, category and op of each) and the same live and reserved peaks and
// cudaMalloc count, so the memory figures of a large run can come from a dry run of it (LAB_EMU_DRY_RUN=1).
// Emulation build only.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch10_gpt2/run_config.h"
#include "common/core/memory.h"
#include "common/cuda/emulation/dry_run.h"
#include "tests/ch10_gpt2/run_memory_check.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

struct Event {
  bool is_alloc;
  int64_t bytes;
  MemCategory category;
  std::string op;
  bool operator==(const Event&) const = default;
};

struct TwoSteps {
  std::vector<Event> events;
  int64_t peak_total = 0, peak_reserved = 0, system_allocs = 0;
};

// Two steps of `config`, built from an empty cache, with every allocator event recorded; the peaks and the
// cudaMalloc count relative to where the run began.
TwoSteps two_steps(const RunConfig& config, bool dry) {
  Allocator& allocator = allocator_for(config.device);
  allocator.empty_cache();
  allocator.reset_peak();
  const MemoryStats before = allocator.stats();
  TwoSteps out;
  allocator.set_event_hook([&out](const MemoryEvent& e) {
    out.events.push_back({e.is_alloc, e.bytes, e.category, e.op});
  });
  cuda::emu::set_dry_run(dry);
  {
    TrainingRun run = build_run(config);
    Rng rng(5);
    const Tensor inputs = test::random_ids({2, 16}, rng, config.model.vocab_size).to(config.device);
    const Tensor targets = test::random_ids({2, 16}, rng, config.model.vocab_size).to(config.device);
    const BatchSource source = [&] { return MicroBatch{inputs, targets}; };
    run.run(source, 1e-3);
    run.run(source, 1e-3);
  }
  cuda::emu::set_dry_run(false);
  allocator.set_event_hook({});
  const MemoryStats after = allocator.stats();
  out.peak_total = after.peak_total - before.live_total;
  out.peak_reserved = after.peak_reserved - before.reserved;
  out.system_allocs = after.system_allocs - before.system_allocs;
  return out;
}

void expect_dry_run_allocates_as_the_run(const RunConfig& config) {
  two_steps(config, false);  // whatever a first run allocates once (cuBLAS's workspace, kernels' tables)
  const TwoSteps run = two_steps(config, false), dry = two_steps(config, true);
  ASSERT_GT(run.events.size(), 100u);
  EXPECT_EQ(run.events.size(), dry.events.size());
  for (size_t i = 0; i < std::min(run.events.size(), dry.events.size()); ++i)
    ASSERT_EQ(run.events[i], dry.events[i]) << "event " << i << " (" << run.events[i].op << ")";
  EXPECT_EQ(run.peak_total, dry.peak_total);
  EXPECT_EQ(run.peak_reserved, dry.peak_reserved);
  EXPECT_EQ(run.system_allocs, dry.system_allocs);
  EXPECT_GT(run.system_allocs, 0);
}

TEST(DryRunMemoryCuda, Fp32AsRun) {
  expect_dry_run_allocates_as_the_run(test::tiny_theory_run(Device::cuda()));
}

TEST(DryRunMemoryCuda, Bf16WithEverySpeedRungAsRun) {
  RunConfig config = test::tiny_theory_run(Device::cuda());
  config.math = MathMode::BF16;
  config.rungs = ModelRungs::parse("fused", "flash", "selective", "16bit");
  config.step.grad_clip = 1.0;
  expect_dry_run_allocates_as_the_run(config);
}

}  // namespace
}  // namespace lab
