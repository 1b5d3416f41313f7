// The emulator's dry run (common/cuda/emulation/dry_run.h) makes the same allocations as the real run: two
// training steps of a tiny GPT-2 on emulated CUDA, each rung's configuration once run and once dry, give the same
// sequence of allocations and frees (bytes, category and op of each) and the same live and reserved peaks and
// cudaMalloc count, so the memory figures of a large run can come from a dry run of it (LAB_EMU_DRY_RUN=1).
// Emulation build only.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
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
TwoSteps two_steps(const RunConfig& config, bool dry, int64_t rows = 2, int64_t seq = 16) {
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
    const Tensor inputs = test::random_ids({rows, seq}, rng, config.model.vocab_size).to(config.device);
    const Tensor targets = test::random_ids({rows, seq}, rng, config.model.vocab_size).to(config.device);
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

// GPT-2 124M at T = 1024 with every speed rung (bf16, 16-bit activations, fused kernels, flash attention, clipping)
// and selective recompute with the LayerNorms' outputs: the allocator's reserved peak over two training steps, from
// a dry run, is under what llm.c's train_gpt2cu (cuDNN attention, its default recompute of the GELU) held on an H100
// at B = 8, 16 and 32: 5.1, 7.8 and 13.1 GB. Without the LayerNorms (--recompute selective) B = 32 reserves 13.16 GB.
TEST(DryRunMemoryCuda, TheD12StepReservesLessThanLlmc) {
  RunConfig config;
  config.model = GPT2Config::from_name("d12");
  config.device = Device::cuda();
  config.math = MathMode::BF16;
  config.rungs = ModelRungs::parse("fused", "flash", "selective-ln", "16bit");
  config.step.grad_clip = 1.0;
  for (const auto& [rows, llmc_gb] : std::vector<std::pair<int64_t, double>>{{8, 5.1}, {16, 7.8}, {32, 13.1}}) {
    const double reserved_gb = static_cast<double>(two_steps(config, true, rows, 1024).peak_reserved) / 1e9;
    std::printf("B = %lld: reserved peak %.2f GB (llm.c %.1f GB)\n", static_cast<long long>(rows), reserved_gb,
                llmc_gb);
    EXPECT_LT(reserved_gb, llmc_gb) << "B = " << rows;
  }
}

}  // namespace
}  // namespace lab
