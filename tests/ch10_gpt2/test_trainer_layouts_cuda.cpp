// gpt2_train under mpirun on --device cuda (labels mpi and cuda): tensor parallelism (--tp 2), pipeline
// parallelism (--pp 2 --micro-batches 2), data parallelism (--dp 2) and ZeRO over dp 2 communicate through the
// NCCL backend and log the training and validation losses of one process on the GPU with the same global batch,
// eager and replayed from a CUDA graph (--cuda-graphs, the transfers queued in the graph); ranks other than 0
// print nothing. Each layout runs two ranks, and NCCL wants a GPU of its own for each: skipped with fewer
// than two GPUs; the emulation build runs it (two emulated GPUs, one per rank, and the NCCL stand-in over MPI).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

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

// Each test runs the one process once and compares with it each layout: eager, then replayed from a CUDA graph
// (--cuda-graphs: each rank captures its step with its transfers queued in the graph, over NCCL). A replay that
// left a transfer out would train each rank on its own shard of the model or the batch alone.

// Tensor parallelism's all-reduces (the activations in forward, their gradients in backward, the norm's sum).
TEST(TrainerLayoutsOnCuda, TensorParallelLogsTheLossesOfOneProcessEagerAndFromACudaGraph) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const testing::Strategy tp = testing::tensor_parallel();
  testing::expect_layouts_match_one_process(
      testing::scratch_directory(), "cuda", tp.one_process,
      {tp.parallel, testing::variant(tp.parallel, "tp2_graphs", "--cuda-graphs")});
}

// The pipeline's sends and receives, its tied embedding's and loss's all-reduces; in the graph the stages run
// untimed, and the progress line and the log say so.
TEST(TrainerLayoutsOnCuda, PipelineParallelLogsTheLossesOfOneProcessAccumulatingEagerAndFromACudaGraph) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const testing::Strategy pp = testing::pipeline_parallel();
  const std::vector<testing::LaunchResult> runs = testing::expect_layouts_match_one_process(
      testing::scratch_directory(), "cuda", pp.one_process,
      {pp.parallel, testing::variant(pp.parallel, "pp2_graphs", "--cuda-graphs")});
  const testing::LaunchResult& graphed = runs.back();
  EXPECT_NE(graphed.out[0].find("bubble not timed in a graph (ideal 33.3%)"), std::string::npos) << graphed.out[0];
  for (const Json& record : testing::read_log(graphed.log))
    if (record.contains("loss")) {
      EXPECT_FALSE(record.contains("bubble"));
      EXPECT_TRUE(record.contains("bubble_ideal"));
    }
}

// Data parallelism's all-reduces, eager and in the graph with both stages: bucketed after backward, or overlapped
// on a side stream forked from the step's (the default).
TEST(TrainerLayoutsOnCuda, DataParallelLogsTheLossesOfOneProcessEagerAndFromACudaGraphWithEachStage) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const testing::Strategy dp = testing::data_parallel();
  const std::vector<testing::LaunchResult> runs = testing::expect_layouts_match_one_process(
      testing::scratch_directory(), "cuda", dp.one_process,
      {dp.parallel, testing::variant(dp.parallel, "dp2_graphs_overlap", "--cuda-graphs --dp-stage overlap"),
       testing::variant(dp.parallel, "dp2_graphs_bucketed", "--cuda-graphs --dp-stage bucketed")});
  for (size_t i = 1; i < runs.size(); ++i)
    EXPECT_NE(runs[i].out[0].find("--cuda-graphs: the first step runs eagerly"), std::string::npos) << runs[i].out[0];
}

// ZeRO: stage 3 eager with prefetch (its gathers on a thread, after an event of the compute stream); every stage
// in the graph, its collectives queued and its buckets' packing and unpacking and stage 3's copies into its gather
// buffers queued on the stream (stream_copy.h). Stage 3's prefetch in a graph is refused with its reason.
TEST(TrainerLayoutsOnCuda, ZeroLogsTheLossesOfOneProcessStage3EagerWithPrefetchAndEveryStageFromACudaGraph) {
  LAB_REQUIRE_A_GPU_PER_RANK();
  const std::string dir = testing::scratch_directory();
  const testing::Strategy dp = testing::data_parallel();
  testing::expect_layouts_match_one_process(dir, "cuda", dp.one_process,
                                            {testing::variant(dp.parallel, "zero3", "--zero 3 --zero-prefetch"),
                                             testing::variant(dp.parallel, "zero1_graphs", "--zero 1 --cuda-graphs"),
                                             testing::variant(dp.parallel, "zero2_graphs", "--zero 2 --cuda-graphs"),
                                             testing::variant(dp.parallel, "zero3_graphs", "--zero 3 --cuda-graphs")});
  const testing::LaunchResult r = testing::launch_trainer(
      dir, "zero3_prefetch_graphs", 2,
      testing::layout_run_flags(dir, "cuda") + " --batch 2 --dp 2 --zero 3 --zero-prefetch --cuda-graphs --steps 1");
  EXPECT_NE(r.exit_code, 0);
  for (const std::string& err : r.err)
    EXPECT_NE(err.find("--cuda-graphs: ZeRO stage 3 with --zero-prefetch gathers the next unit from a thread"),
              std::string::npos)
        << err;
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
