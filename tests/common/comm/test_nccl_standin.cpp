// The emulation build's NCCL stand-in through NCCL's own API, for what the backend's tests do not reach:
// a group whose sends and receives need each other, 16-bit sums accumulated in float, NCCL's in-place
// reduce-scatter, ncclCommAbort releasing a stream whose operation waits for a rank that never calls, a call
// captured in a CUDA graph taking its turn at every launch, and the arguments NCCL refuses.
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "common/cuda/graph.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/common/comm/nccl_test.h"

namespace lab::comm {
namespace {

using lab::testing::mpi_world;

// This rank's GPU: the ranks share one machine, whose emulated GPUs are the same in every process, and NCCL
// wants one GPU per rank.
Device gpu() {
  return lab::testing::rank_gpu();
}

// An NCCL communicator over the world's ranks, each on its own GPU, which is the current device while the
// communicator lives; destroyed with the test.
class NcclWorld {
 public:
  NcclWorld() : on_(gpu().index) {
    Tensor id = Tensor::zeros({sizeof(ncclUniqueId) / sizeof(int32_t)}, DType::I32);
    if (mpi_world().rank() == 0) {
      ncclUniqueId made;
      EXPECT_EQ(ncclGetUniqueId(&made), ncclSuccess);
      std::memcpy(id.raw(), &made, sizeof(made));
    }
    mpi_world().broadcast(id, 0);
    ncclUniqueId shared;
    std::memcpy(&shared, id.raw(), sizeof(shared));
    EXPECT_EQ(ncclCommInitRank(&comm_, mpi_world().size(), shared, mpi_world().rank()), ncclSuccess);
  }
  ~NcclWorld() {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;

  ncclComm_t get() const { return comm_; }
  ncclComm_t release() { return std::exchange(comm_, nullptr); }

 private:
  cuda::DeviceGuard on_;
  ncclComm_t comm_ = nullptr;
};

// The tests queue their calls on the current stream of the rank's GPU (the legacy stream), behind the copies
// and memsets that fill their tensors; the abort test takes a stream of its own, which nothing else waits for.

// Both ring neighbours' messages are larger than MPI sends eagerly, so each send completes only once its
// receive is posted: queued one after the other (without a group), every rank's send would wait for a
// receive queued behind its peer's own send.
TEST(NcclStandIn, AGroupPostsItsSendsAndReceivesTogether) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  NcclWorld nccl;
  const int n = mpi_world().size(), rank = mpi_world().rank();
  constexpr int64_t kCount = int64_t{1} << 18;
  const Tensor outgoing = Tensor::from_floats(std::vector<float>(kCount, static_cast<float>(rank)), {kCount}).to(gpu());
  const Tensor incoming = Tensor::zeros({kCount}, DType::F32, gpu());
  const cudaStream_t stream = cuda::current_stream(gpu().index);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(outgoing.raw(), kCount, ncclFloat32, (rank + 1) % n, nccl.get(), stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(incoming.raw(), kCount, ncclFloat32, (rank + n - 1) % n, nccl.get(), stream), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  cuda::synchronize();
  ncclResult_t async_error = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(nccl.get(), &async_error), ncclSuccess);
  EXPECT_EQ(async_error, ncclSuccess);
  EXPECT_EQ(incoming.to_floats(), std::vector<float>(kCount, static_cast<float>((rank + n - 1) % n)));
}

// 1 + (n - 1) x 2^-8 in bf16: each 2^-8 is half a unit in the last place of 1. Summed in float and rounded
// once, the result is round(1 + (n - 1) 2^-8); adding one rank at a time in bf16 could round each half
// unit away.
TEST(NcclStandIn, SixteenBitSumsAccumulateInFloatAndRoundOnce) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  NcclWorld nccl;
  const int n = mpi_world().size();
  const float mine = mpi_world().rank() == 0 ? 1.0f : 0x1p-8f;
  const Tensor tensor = Tensor::from_floats(std::vector<float>(3, mine), {3}).to_dtype(DType::BF16).to(gpu());
  const cudaStream_t stream = cuda::current_stream(gpu().index);
  ASSERT_EQ(ncclAllReduce(tensor.raw(), tensor.raw(), 3, ncclBfloat16, ncclSum, nccl.get(), stream), ncclSuccess);
  cuda::synchronize();
  const float expected = bf16_bits_to_float(float_to_bf16_bits(1.0f + static_cast<float>(n - 1) * 0x1p-8f));
  EXPECT_EQ(tensor.to_floats(), std::vector<float>(3, expected));
}

// NCCL's in-place reduce-scatter: recvbuff is block `rank` of sendbuff.
TEST(NcclStandIn, ReduceScatterInPlaceIntoItsOwnBlock) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  NcclWorld nccl;
  const int n = mpi_world().size(), rank = mpi_world().rank();
  std::vector<int32_t> values(static_cast<size_t>(2 * n));
  for (int i = 0; i < 2 * n; ++i) values[static_cast<size_t>(i)] = 100 * rank + i;
  const Tensor buffer = Tensor::from_ints(values, {2 * n}).to(gpu());
  const Tensor block = buffer.view(2 * rank, {2});
  const cudaStream_t stream = cuda::current_stream(gpu().index);
  ASSERT_EQ(ncclReduceScatter(buffer.raw(), block.raw(), 2, ncclInt32, ncclSum, nccl.get(), stream), ncclSuccess);
  cuda::synchronize();
  const int32_t rank_sum = 100 * n * (n - 1) / 2;
  EXPECT_EQ(block.to_ints(), (std::vector<int32_t>{rank_sum + n * 2 * rank, rank_sum + n * (2 * rank + 1)}));
}

// An all-reduce captured in a graph runs at every launch, each time in its turn among the communicator's calls
// (the host's order: launch, an eager call, launch again), and the capture itself runs nothing. Each launch sums
// the ranks' values again: rank r's r + 1 becomes n(n+1)/2 after one launch and n x n(n+1)/2 after two.
TEST(NcclStandIn, ACapturedAllReduceRunsInItsTurnAtEveryLaunch) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  NcclWorld nccl;
  const int n = mpi_world().size();
  const float mine = static_cast<float>(mpi_world().rank() + 1);
  const Tensor graphed = Tensor::from_floats(std::vector<float>(4, mine), {4}).to(gpu());
  const Tensor eager = Tensor::from_floats(std::vector<float>(3, 2 * mine), {3}).to(gpu());
  cuda::Stream stream(gpu().index);
  cuda::Graph graph;
  graph.capture(stream, [&] {
    ASSERT_EQ(ncclAllReduce(graphed.raw(), graphed.raw(), 4, ncclFloat32, ncclSum, nccl.get(), stream.get()),
              ncclSuccess);
  });
  stream.synchronize();
  EXPECT_EQ(graphed.to_floats(), std::vector<float>(4, mine)) << "the capture ran the all-reduce";
  graph.launch(stream);
  ASSERT_EQ(ncclAllReduce(eager.raw(), eager.raw(), 3, ncclFloat32, ncclSum, nccl.get(), stream.get()), ncclSuccess);
  graph.launch(stream);
  stream.synchronize();
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  EXPECT_EQ(graphed.to_floats(), std::vector<float>(4, static_cast<float>(n) * ranks_sum));
  EXPECT_EQ(eager.to_floats(), std::vector<float>(3, 2 * ranks_sum));
  ncclResult_t async_error = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(nccl.get(), &async_error), ncclSuccess);
  EXPECT_EQ(async_error, ncclSuccess);
}

// Rank 0 starts an all-reduce that nobody else calls: its stream stays busy until ncclCommAbort gives the
// operation up; then the stream moves on. No error was recorded: the operation never failed, it waited.
TEST(NcclStandIn, AbortReleasesTheStreamOfAnOperationThatWaitsForever) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  NcclWorld nccl;
  if (mpi_world().rank() == 0) {
    const Tensor tensor = Tensor::zeros({16}, DType::F32, gpu());
    cuda::Stream stream(gpu().index);
    ASSERT_EQ(ncclAllReduce(tensor.raw(), tensor.raw(), 16, ncclFloat32, ncclSum, nccl.get(), stream.get()),
              ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(stream.query());
    ncclResult_t async_error = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(nccl.get(), &async_error), ncclSuccess);
    EXPECT_EQ(async_error, ncclSuccess);
    ASSERT_EQ(ncclCommAbort(nccl.release()), ncclSuccess);
    stream.synchronize();
  }
  mpi_world().barrier();
}

TEST(NcclStandIn, ArgumentsNcclRefusesAreRefusedWithAMessage) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  NcclWorld nccl;
  const Tensor tensor = Tensor::zeros({4}, DType::F32, gpu());
  std::vector<float> host(4);
  const cudaStream_t stream = cuda::current_stream(gpu().index);
  const auto expect_refused = [](ncclResult_t result, ncclResult_t expected, const std::string& message) {
    EXPECT_EQ(result, expected) << message;
    const std::string last = ncclGetLastError(nullptr);
    EXPECT_NE(last.find(message), std::string::npos) << last;
  };
  expect_refused(ncclAllReduce(host.data(), tensor.raw(), 4, ncclFloat32, ncclSum, nccl.get(), stream),
                 ncclInvalidArgument, "ncclAllReduce: sendbuff");
  // Far past the end: the caching allocator's blocks lie inside larger cudaMalloc segments.
  expect_refused(ncclAllReduce(tensor.raw(), tensor.raw(), 1 << 28, ncclFloat32, ncclSum, nccl.get(), stream),
                 ncclInvalidArgument, "run past the end of its allocation");
  expect_refused(ncclAllReduce(tensor.raw(), tensor.raw(), 2, ncclFloat64, ncclSum, nccl.get(), stream),
                 ncclInvalidArgument, "reduces int32, float32, float16 and bfloat16");
  expect_refused(ncclBroadcast(tensor.raw(), tensor.raw(), 4, ncclFloat32, 99, nccl.get(), stream), ncclInvalidArgument,
                 "root 99 is not in [0, ");
  expect_refused(ncclSend(tensor.raw(), 4, ncclFloat32, -1, nccl.get(), stream), ncclInvalidArgument,
                 "peer -1 is not in [0, ");
  expect_refused(ncclGroupEnd(), ncclInvalidUsage, "no ncclGroupStart");
  // A refused call queues nothing: the communicator still works.
  ASSERT_EQ(ncclAllReduce(tensor.raw(), tensor.raw(), 4, ncclFloat32, ncclSum, nccl.get(), stream), ncclSuccess);
  cuda::synchronize();
  EXPECT_EQ(tensor.to_floats(), std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace lab::comm
