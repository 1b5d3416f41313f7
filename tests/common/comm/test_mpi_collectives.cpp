// The MPI backend's collectives against the single-process truth (collective_checks.h): every collective,
// dtype and reduction, in place and out of place, at zero, one, odd and larger sizes; fresh inputs on
// every run. In a CUDA build the same checks run on CUDA tensors (staged through pinned host memory).
#include <gtest/gtest.h>

#include "tests/common/comm/collective_checks.h"
#include "tests/common/comm/mpi_test.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif

namespace lab::comm {
namespace {

using lab::testing::fresh_communicator;

// ---------------------------------------------------------------- CPU tensors

TEST(MpiCollectives, WorldIsMpi) {
  EXPECT_EQ(lab::testing::mpi_world().backend(), "mpi");
  EXPECT_GE(lab::testing::mpi_world().size(), 2);
}

// MPI completes each operation on the host, so a step that communicates over more than one rank of it cannot be
// captured in a CUDA graph, and says why; a group of one has nothing to exchange and does not block a capture.
TEST(MpiCollectives, AGroupOfSeveralRanksBlocksACaptureAndAGroupOfOneDoesNot) {
  Communicator& world = lab::testing::mpi_world();
  EXPECT_EQ(world.capture_blocker("the test's all-reduces"),
            "the test's all-reduces over the mpi backend complete on the host (NCCL queues them on the stream)");
  const std::unique_ptr<Communicator> alone = world.split(world.rank(), 0);
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(alone->size(), 1);
  EXPECT_EQ(alone->capture_blocker("the test's all-reduces"), "");
  alone->queue_where_able();  // cannot queue: stays as it is
  EXPECT_FALSE(alone->queued());
}

TEST(MpiCollectives, AllReduceEveryDtypeOpAndSize) {
  lab::testing::check_all_reduce(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, ReduceScatterEveryDtypeOpAndSize) {
  lab::testing::check_reduce_scatter(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, AllGatherEveryDtypeAndSize) {
  lab::testing::check_all_gather(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, BroadcastFromEveryRoot) {
  lab::testing::check_broadcast(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, AllReduceOfRandomFloatsIsWithinRoundingOfTheExactSum) {
  lab::testing::check_all_reduce_of_random_floats(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, SequenceNumbersAgreeAcrossRanks) {
  auto comm = fresh_communicator();
  comm->barrier();
  comm->all_reduce(Tensor::zeros({3}, DType::F32), ReduceOp::Sum);
  Tensor sequences = Tensor::zeros({comm->size()}, DType::I32);
  sequences.data<int32_t>()[comm->rank()] = static_cast<int32_t>(comm->sequence());
  comm->all_gather(sequences);  // #3
  EXPECT_EQ(sequences.to_ints(), std::vector<int32_t>(comm->size(), 2));
  EXPECT_EQ(comm->sequence(), 3u);
}

TEST(MpiCollectives, TrafficCountsEachKindsCallsAndPayload) {
  lab::testing::check_traffic_counts(*fresh_communicator(), Device::cpu());
}

// ---------------------------------------------------------------- CUDA tensors

#ifdef LAB_WITH_CUDA
TEST(MpiCollectives, CudaTensorsStagedThroughPinnedMemory) {
  auto comm = fresh_communicator();
  // Every rank must take the same path: all skip if any rank sees no GPU.
  Tensor without_gpu = Tensor::from_ints(std::vector<int32_t>{cuda::device_count() > 0 ? 0 : 1}, {1});
  comm->all_reduce(without_gpu, ReduceOp::Max);
  if (without_gpu.to_ints()[0] != 0) GTEST_SKIP() << "a rank sees no GPU";
  const Device gpu = Device::cuda(comm->rank() % cuda::device_count());
  lab::testing::check_all_reduce(*comm, gpu);
  lab::testing::check_reduce_scatter(*comm, gpu);
  lab::testing::check_all_gather(*comm, gpu);
  lab::testing::check_broadcast(*comm, gpu);
}
#endif

}  // namespace
}  // namespace lab::comm
