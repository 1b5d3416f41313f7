// The NCCL backend's collectives against the single-process truth (collective_checks.h, the MPI backend's
// checks on CUDA tensors): every collective, dtype and reduction, in place and out of place, at zero, one,
// odd and larger sizes; the world helper; and the stream order of a collective: it sees the work queued
// before it on the caller's stream; two ranks on one GPU refused, by NCCL and, first and in the program's
// terms, by communicator_for. Skipped on every rank unless every rank has a GPU of its own.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/comm/device_communicator.h"
#include "common/cuda/pinned.h"
#include "common/cuda/stream.h"
#include "tests/common/comm/collective_checks.h"
#include "tests/common/comm/nccl_test.h"
#include "tests/common/cuda/stream_gate.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::fresh_nccl_communicator;
using lab::testing::rank_gpu;

TEST(NcclCollectives, TheWorldHelperGivesNcclForAGpuAndMpiForTheCpu) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  Communicator& world = lab::testing::mpi_world();
  const auto on_gpu = communicator_for(world, rank_gpu());
  EXPECT_EQ(on_gpu->backend(), "nccl");
  EXPECT_EQ(on_gpu->rank(), world.rank());
  EXPECT_EQ(on_gpu->size(), world.size());
  EXPECT_EQ(on_gpu->timeout(), world.timeout());
  const auto on_cpu = communicator_for(world, Device::cpu());
  EXPECT_EQ(on_cpu->backend(), "mpi");
  Tensor ones = Tensor::from_floats(std::vector<float>{1, 1, 1}, {3}).to(rank_gpu());
  on_gpu->all_reduce(ones, ReduceOp::Sum);
  EXPECT_EQ(ones.to_floats(), std::vector<float>(3, static_cast<float>(world.size())));
}

TEST(NcclCollectives, AllReduceEveryDtypeOpAndSize) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_all_reduce(*fresh_nccl_communicator(), rank_gpu());
}

TEST(NcclCollectives, ReduceScatterEveryDtypeOpAndSize) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_reduce_scatter(*fresh_nccl_communicator(), rank_gpu());
}

TEST(NcclCollectives, AllGatherEveryDtypeAndSize) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_all_gather(*fresh_nccl_communicator(), rank_gpu());
}

TEST(NcclCollectives, BroadcastFromEveryRoot) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_broadcast(*fresh_nccl_communicator(), rank_gpu());
}

TEST(NcclCollectives, AllReduceOfRandomFloatsIsWithinRoundingOfTheExactSum) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_all_reduce_of_random_floats(*fresh_nccl_communicator(), rank_gpu());
}

TEST(NcclCollectives, TrafficCountsEachKindsCallsAndPayload) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_traffic_counts(*fresh_nccl_communicator(), rank_gpu());
}

// The input is written by a copy that the caller's stream holds back for a while: an all-reduce that did
// not wait for the caller's stream would sum the zeros it finds there. Work queued on the caller's stream
// after the call sees the result.
TEST(NcclCollectives, ACollectiveSeesTheWorkQueuedBeforeItOnTheCallersStream) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator();
  const Device gpu = rank_gpu();
  const int n = comm->size();
  constexpr int64_t kCount = 1000;
  cuda::Stream producer(gpu.index);
  cuda::StreamGuard on_producer(producer);
  const Tensor tensor = Tensor::zeros({kCount}, DType::F32, gpu);
  cuda::PinnedBuffer host(kCount * sizeof(float));
  for (int64_t i = 0; i < kCount; ++i) host.as<float>()[i] = static_cast<float>(comm->rank() + 1);
  {
    lab::test::StreamGate gate(producer);
    cuda::copy_async(tensor.raw(), gpu, host.data(), Device::cpu(), host.bytes());
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      gate.release();
    });
    comm->all_reduce(tensor, ReduceOp::Sum);
    opener.join();
  }
  cuda::copy_async(host.data(), Device::cpu(), tensor.raw(), gpu, host.bytes());
  producer.synchronize();
  for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(host.as<float>()[i], n * (n + 1) / 2.0f) << "element " << i;
}

// NCCL refuses a communicator whose ranks share a GPU ("Duplicate GPU detected"), on every rank; the
// emulation's stand-in does too.
TEST(NcclCollectives, NcclRefusesTwoRanksOnOneGpu) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::expect_error(
      [] { NcclCommunicator(dynamic_cast<MpiCommunicator&>(lab::testing::mpi_world()), Device::cuda(0)); },
      ErrorKind::Comm, {"ncclInvalidUsage"});
}

// communicator_for says it before NCCL starts, with what to do.
TEST(NcclCollectives, TheWorldHelperRefusesTwoRanksOnOneGpuSayingWhatToDo) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::expect_error([] { communicator_for(lab::testing::mpi_world(), Device::cuda(0)); },
                             ErrorKind::InvalidArgument,
                             {"ranks 0 and 1 would share one GPU (cuda:0", "NCCL needs a GPU of its own for every rank",
                              "--device cpu", "CUDA_VISIBLE_DEVICES"});
}

}  // namespace
}  // namespace lab::comm
