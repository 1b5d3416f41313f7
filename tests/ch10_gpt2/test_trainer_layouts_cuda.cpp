// gpt2_train under mpirun on --device cuda (labels mpi and cuda): tensor parallelism (--tp 2), pipeline
// parallelism (--pp 2 --micro-batches 2) and data parallelism (--dp 2) communicate through the NCCL backend and
// log the training and validation losses of one process on the GPU with the same global batch, and so do ZeRO
// stage 3 with prefetch over dp 2 (its gathers on a thread, after an event of the compute stream) and data, tensor
// and pipeline parallelism replayed from a CUDA graph (--cuda-graphs, the transfers queued in the graph); ranks other
// than 0 print nothing. Each layout runs two ranks, and NCCL wants a GPU of its own for each: skipped with fewer
// than two GPUs; the emulation build runs it (two emulated GPUs, one per rank, and the NCCL stand-in over MPI).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/core/error.h"
#include "common/cuda/runtime.h"
#include "tests/ch10_gpt2/layout_launch.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

constexpr int kRanks = 2;

#define LAB_REQUIRE_A_GPU_PER_RANK()                                                                    \
  do {                                                                                                  \
    LAB_REQUIRE_GPU();                                                                                  \
    if (cuda::device_count() < kRanks)                                                                  \
      GTEST_SKIP() << "needs " << kRanks << " GPUs (NCCL wants one per rank), " << cuda::device_count() \
                   << " visible: skipped";                                                              \
  } while (0)

TEST(TrainerLayoutsOnCuda, TensorParallelLogsTheLossesOfOneProcess) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::tensor_parallel());
}

TEST(TrainerLayoutsOnCuda, PipelineParallelLogsTheLossesOfOneProcessAccumulating) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::pipeline_parallel());
}

TEST(TrainerLayoutsOnCuda, DataParallelLogsTheLossesOfOneProcessWithTheWholeBatch) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::data_parallel());
}

TEST(TrainerLayoutsOnCuda, ZeroStage3WithPrefetchLogsTheLossesOfOneProcessWithTheWholeBatch) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  testing::expect_strategy_matches_one_process(
      testing::scratch_directory(), "cuda",
      {{"zero3", 2, "--batch 2 --dp 2 --zero 3 --zero-prefetch"}, {"one_process", 1, "--batch 4"}});
}

// --cuda-graphs under data parallelism: each rank captures its step with the all-reduces queued in the graph (over
// NCCL), bucketed after backward or overlapped on a side stream forked from the step's (the default stage), and
// the replays log the one process's losses and sample: a replay that left the all-reduces out would train each
// rank on its half of the batch alone.
TEST(TrainerLayoutsOnCuda, DataParallelWithCudaGraphsLogsTheLossesOfOneProcessWithEachStage) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const std::string dir = testing::scratch_directory();
  const testing::LaunchResult one =
      testing::run_layout(dir, "one_process", "cuda", {"one_process", 1, "--batch 4"}, 4, "--sample-tokens 8");
  for (const char* stage : {"overlap", "bucketed"}) {
    const std::string name = cat("dp2_graphs_", stage);
    const testing::LaunchResult graphed = testing::run_layout(
        dir, name, "cuda", {name, 2, cat("--batch 2 --dp 2 --cuda-graphs --dp-stage ", stage)}, 4, "--sample-tokens 8");
    testing::expect_same_losses(one, graphed, {1, 2, 3, 4}, name);
    EXPECT_EQ(testing::logged_sample(graphed), testing::logged_sample(one)) << name << ": sample";
    EXPECT_NE(graphed.out[0].find("--cuda-graphs: the first step runs eagerly"), std::string::npos) << graphed.out[0];
  }
}

// Tensor parallelism's all-reduces (the activations in forward, their gradients in backward, the norm's sum) are
// queued in the graph too.
TEST(TrainerLayoutsOnCuda, TensorParallelWithCudaGraphsLogsTheLossesOfOneProcess) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::tensor_parallel(),
                                               "--cuda-graphs");
}

// The pipeline's sends and receives, its tied embedding's and loss's all-reduces go into the graph too; the stages
// then run untimed, and the progress line says so.
TEST(TrainerLayoutsOnCuda, PipelineParallelWithCudaGraphsLogsTheLossesOfOneProcessAccumulating) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const testing::LaunchResult r = testing::expect_strategy_matches_one_process(
      testing::scratch_directory(), "cuda", testing::pipeline_parallel(), "--cuda-graphs");
  EXPECT_NE(r.out[0].find("bubble not timed in a graph (ideal 33.3%)"), std::string::npos) << r.out[0];
  for (const Json& record : testing::read_log(r.log))
    if (record.contains("loss")) {
      EXPECT_FALSE(record.contains("bubble"));
      EXPECT_TRUE(record.contains("bubble_ideal"));
    }
}

// ZeRO stages 1 and 2 queue their collectives in the graph too, with their buckets' packing and unpacking
// queued on the stream (stream_copy.h); they log the one process's losses. Stage 3 is refused with its reason.
TEST(TrainerLayoutsOnCuda, ZeroStagesOneAndTwoWithCudaGraphsLogTheLossesOfOneProcessAndStageThreeIsRefused) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const std::string dir = testing::scratch_directory();
  const testing::LaunchResult one =
      testing::run_layout(dir, "one_process", "cuda", {"one_process", 1, "--batch 4"}, 4, "--sample-tokens 8");
  for (const char* zero : {"1", "2"}) {
    const std::string name = cat("zero", zero, "_graphs");
    const testing::LaunchResult graphed = testing::run_layout(
        dir, name, "cuda", {name, 2, cat("--batch 2 --dp 2 --cuda-graphs --zero ", zero)}, 4, "--sample-tokens 8");
    testing::expect_same_losses(one, graphed, {1, 2, 3, 4}, name);
    EXPECT_EQ(testing::logged_sample(graphed), testing::logged_sample(one)) << name << ": sample";
  }
  const testing::LaunchResult r = testing::launch_trainer(
      dir, "zero3_graphs", 2,
      testing::layout_run_flags(dir, "cuda") + " --batch 2 --dp 2 --zero 3 --cuda-graphs --steps 1");
  EXPECT_NE(r.exit_code, 0);
  for (const std::string& err : r.err)
    EXPECT_NE(err.find("--cuda-graphs: ZeRO stage 3 copies each block's shard"), std::string::npos) << err;
}

// Sets an environment variable for the scope (the ranks mpirun starts inherit it), then restores it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Two ranks shown one GPU (CUDA_VISIBLE_DEVICES on a GPU machine, one emulated GPU in the emulation build):
// gpt2_train stops before NCCL starts, with one line per rank that says what to do.
TEST(TrainerLayoutsOnCuda, TwoRanksOnOneGpuAreRefusedSayingWhatToDo) {
  LAB_REQUIRE_GPU();
  const std::string dir = testing::scratch_directory();
  const ScopedEnvironment one_gpu("CUDA_VISIBLE_DEVICES", "0"), one_emulated_gpu("LAB_EMU_DEVICES", "1");
  const testing::LaunchResult r = testing::launch_trainer(
      dir, "one_gpu", 2, testing::layout_run_flags(dir, "cuda") + " --batch 2 --dp 2 --steps 1");
  EXPECT_NE(r.exit_code, 0);
  for (const std::string& err : r.err) {
    EXPECT_NE(err.find("ranks 0 and 1 would share one GPU"), std::string::npos) << err;
    EXPECT_NE(err.find("2 ranks run on one node, which shows 1 GPU"), std::string::npos) << err;
    EXPECT_NE(err.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace lab
