// gpt2_train under mpirun on --device cuda (labels mpi and cuda): tensor parallelism (--tp 2), pipeline
// parallelism (--pp 2 --micro-batches 2) and data parallelism (--dp 2) communicate through the NCCL backend and
// log the training and validation losses of one process on the GPU with the same global batch, and so does ZeRO
// stage 3 with prefetch over dp 2 (its gathers on a thread, after an event of the compute stream); ranks other
// than 0 print nothing. Skipped without a GPU; the emulation build runs it (two emulated GPUs, one per rank,
// and the NCCL stand-in over MPI).
#include <gtest/gtest.h>

#include "tests/ch10_gpt2/layout_launch.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

TEST(TrainerLayoutsOnCuda, TensorParallelLogsTheLossesOfOneProcess) {
  LAB_REQUIRE_GPU();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::tensor_parallel());
}

TEST(TrainerLayoutsOnCuda, PipelineParallelLogsTheLossesOfOneProcessAccumulating) {
  LAB_REQUIRE_GPU();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::pipeline_parallel());
}

TEST(TrainerLayoutsOnCuda, DataParallelLogsTheLossesOfOneProcessWithTheWholeBatch) {
  LAB_REQUIRE_GPU();
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cuda", testing::data_parallel());
}

TEST(TrainerLayoutsOnCuda, ZeroStage3WithPrefetchLogsTheLossesOfOneProcessWithTheWholeBatch) {
  LAB_REQUIRE_GPU();
  testing::expect_strategy_matches_one_process(
      testing::scratch_directory(), "cuda",
      {{"zero3", 2, "--batch 2 --dp 2 --zero 3 --zero-prefetch"}, {"one_process", 1, "--batch 4"}});
}

}  // namespace
}  // namespace lab
