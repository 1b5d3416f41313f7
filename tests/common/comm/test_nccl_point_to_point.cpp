// The NCCL backend's send and recv: contents of every dtype and size, the order of messages between two
// ranks (NCCL has no tags: they arrive in the order sent), a receive that gets nothing, and (in the
// emulation build, whose stand-in can tell) a message of the wrong size.
#include <gtest/gtest.h>

#include "tests/common/comm/collective_checks.h"
#include "tests/common/comm/nccl_test.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;
using lab::testing::fresh_nccl_communicator;
using lab::testing::rank_gpu;
using namespace std::chrono_literals;

TEST(NcclPointToPoint, RingExchangeOfEveryDtypeAndSize) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  lab::testing::check_ring_exchange(*fresh_nccl_communicator(), rank_gpu(), int64_t{1} << 16);
}

TEST(NcclPointToPoint, MessagesBetweenTwoRanksArriveInTheOrderSent) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator();
  const Device gpu = rank_gpu();
  constexpr int kMessages = 5;
  if (comm->rank() == 0)
    for (int i = 0; i < kMessages; ++i) comm->send(Tensor::from_ints(std::vector<int32_t>{i, 10 * i}, {2}).to(gpu), 1);
  if (comm->rank() == 1)
    for (int i = 0; i < kMessages; ++i) {
      Tensor message = Tensor::zeros({2}, DType::I32, gpu);
      comm->recv(message, 0);
      EXPECT_EQ(message.to_ints(), (std::vector<int32_t>{i, 10 * i}));
    }
  comm->barrier();
}

// The receive times out naming its peer, size and tag, and aborts the NCCL communicator.
TEST(NcclPointToPoint, ARecvThatGetsNoMessageTimesOut) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator(300ms);
  if (comm->rank() != 1) return;
  const Tensor tensor = Tensor::zeros({4}, DType::F32, rank_gpu());
  expect_error([&] { comm->recv(tensor, 0, 9); }, ErrorKind::Comm,
               {cat("rank 1/", comm->size(),
                    " [nccl] recv #1: timed out after 300 ms waiting for a message of 16 bytes from rank 0 (tag 9)"),
                "the NCCL communicator is aborted"});
  EXPECT_TRUE(comm->aborted());
  expect_error([&] { comm->recv(tensor, 0, 9); }, ErrorKind::Comm, {"recv #2", "broken since recv #1 failed"});
}

#ifdef LAB_CUDA_EMULATION
// NCCL itself does not check that a send and its receive agree in size (on a GPU the receive would wait
// until its timeout); the stand-in reports the difference as the receiver's asynchronous error.
TEST(NcclPointToPoint, AMessageOfTheWrongSizeIsTheReceiversAsynchronousError) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  for (int64_t received_into : {12, 8}) {
    auto comm = fresh_nccl_communicator();
    if (comm->rank() == 0) comm->send(Tensor::zeros({10}, DType::F32, rank_gpu()), 1);
    if (comm->rank() == 1)
      expect_error([&] { comm->recv(Tensor::zeros({received_into}, DType::F32, rank_gpu()), 0, 2); }, ErrorKind::Comm,
                   {"rank 1/", "[nccl] recv #1: NCCL reported an asynchronous error: ncclInvalidUsage",
                    received_into > 10 ? "received 40 bytes from rank 0 into a buffer of 48"
                                       : "the ranks passed different counts",
                    "the NCCL communicator is aborted"});
  }
}
#endif

}  // namespace
}  // namespace lab::comm
