// The MPI backend's send and recv: contents, every dtype and size (eager and rendezvous messages),
// the order of messages between two ranks, and the errors of a receive that gets the wrong size or
// nothing at all.
#include <gtest/gtest.h>

#include "tests/common/comm/collective_checks.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;
using lab::testing::fresh_communicator;
using namespace std::chrono_literals;

// 1 << 18 elements is past every transport's eager limit: the rendezvous protocol.
TEST(MpiPointToPoint, RingExchangeOfEveryDtypeAndSize) {
  lab::testing::check_ring_exchange(*fresh_communicator(), Device::cpu(), int64_t{1} << 18);
}

TEST(MpiPointToPoint, MessagesWithOneTagArriveInTheOrderSent) {
  auto comm = fresh_communicator();
  constexpr int kMessages = 6;
  if (comm->rank() == 0) {
    for (int i = 0; i < kMessages; ++i) comm->send(Tensor::from_ints(std::vector<int32_t>{i, 10 * i}, {2}), 1, 4);
    comm->send(Tensor::from_ints(std::vector<int32_t>{99}, {1}), 1, 5);
  } else if (comm->rank() == 1) {
    for (int i = 0; i < kMessages; ++i) {
      Tensor message = Tensor::zeros({2}, DType::I32);
      comm->recv(message, 0, 4);
      EXPECT_EQ(message.to_ints(), (std::vector<int32_t>{i, 10 * i}));
    }
    Tensor last = Tensor::zeros({1}, DType::I32);
    comm->recv(last, 0, 5);
    EXPECT_EQ(last.to_ints(), std::vector<int32_t>{99});
  }
  comm->barrier();
}

// A recv names the size it expects: a shorter message is reported by the backend, a longer one by MPI.
TEST(MpiPointToPoint, AMessageOfTheWrongSizeIsAClearError) {
  for (int64_t received_into : {12, 8}) {
    auto comm = fresh_communicator();
    if (comm->rank() == 0) comm->send(Tensor::zeros({10}, DType::F32), 1, 2);
    if (comm->rank() == 1) {
      const Tensor tensor = Tensor::zeros({received_into}, DType::F32);
      if (received_into > 10)
        expect_error([&] { comm->recv(tensor, 0, 2); }, ErrorKind::Comm,
                     {"rank 1/", "[mpi] recv #1:", "received 10 elements from rank 0 (tag 2) into a tensor of 12"});
      else
        expect_error([&] { comm->recv(tensor, 0, 2); }, ErrorKind::Comm,
                     {"recv #1:", "MPI_ERR_TRUNCATE", "the ranks passed different sizes"});
    }
  }
}

// The receive is withdrawn when it times out, and the communicator is broken from then on.
TEST(MpiPointToPoint, ARecvThatGetsNoMessageTimesOut) {
  auto comm = fresh_communicator(300ms);
  if (comm->rank() == 1) {
    const Tensor tensor = Tensor::zeros({4}, DType::F32);
    expect_error([&] { comm->recv(tensor, 0, 9); }, ErrorKind::Comm,
                 {"rank 1/",
                  "[mpi] recv #1: timed out after 300 ms waiting for a message of 16 bytes from rank 0 "
                  "(tag 9)"});
    expect_error([&] { comm->recv(tensor, 0, 9); }, ErrorKind::Comm, {"recv #2", "broken since recv #1 failed"});
  }
}

// A message too large to be sent eagerly waits for its receive, and times out naming the peer.
TEST(MpiPointToPoint, ASendThatIsNeverReceivedTimesOut) {
  auto comm = fresh_communicator(300ms);
  if (comm->rank() == 0)
    expect_error(
        [&] { comm->send(Tensor::zeros({1 << 20}, DType::F32), 1, 6); }, ErrorKind::Comm,
        {"rank 0/", "[mpi] send #1: timed out after 300 ms waiting for rank 1 to receive 4194304 bytes (tag 6)"});
}

}  // namespace
}  // namespace lab::comm
