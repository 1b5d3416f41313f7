// What the NCCL backend does when the ranks do not make the same calls: a rank that never arrives makes the
// others fail within the timeout, with the operation, its number and the rank waited for, and the NCCL
// communicator aborted; calls that differ between ranks are reported on every rank (the call check over
// MPI) and leave the communicator usable; a tensor on another device is refused. Queued on the stream
// (set_queued), the collectives leave the host at once and the wait for them times out instead.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tests/common/comm/nccl_test.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;
using lab::testing::fresh_nccl_communicator;
using lab::testing::rank_gpu;
using namespace std::chrono_literals;

struct Collective {
  const char* name;
  std::function<void(Communicator&, Device)> call;
};

// One call of each collective, as every rank would make it.
std::vector<Collective> every_collective() {
  return {
      {"all_reduce", [](Communicator& c, Device d) { c.all_reduce(Tensor::zeros({8}, DType::F32, d), ReduceOp::Sum); }},
      {"reduce_scatter",
       [](Communicator& c, Device d) {
         c.reduce_scatter(Tensor::zeros({2 * c.size()}, DType::F32, d), Tensor::zeros({2}, DType::F32, d),
                          ReduceOp::Sum);
       }},
      {"all_gather", [](Communicator& c, Device d) { c.all_gather(Tensor::zeros({3 * c.size()}, DType::BF16, d)); }},
      // From the rank that will not arrive: a root that is there may finish its part alone.
      {"broadcast", [](Communicator& c, Device d) { c.broadcast(Tensor::zeros({5}, DType::I32, d), c.size() - 1); }},
      {"barrier", [](Communicator& c, Device) { c.barrier(); }},
      {"split", [](Communicator& c, Device) { c.split(0, c.rank()); }},
  };
}

// The last rank skips the call; every other rank fails within the timeout and the NCCL communicator is
// aborted (its stream moves on: destroying the communicator waits for that stream). With the call check on,
// the wait that times out is the check's; with it off, the NCCL operation's.
TEST(NcclFailures, ARankThatNeverArrivesTimesOutTheOthersAndAbortsNccl) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  for (bool verify : {true, false})
    for (const Collective& collective : every_collective()) {
      SCOPED_TRACE(cat(collective.name, verify ? " with" : " without", " the call check"));
      auto comm = fresh_nccl_communicator(200ms);
      comm->set_verify_calls(verify);
      comm->barrier();  // #1: everyone is here
      const int last = comm->size() - 1;
      if (comm->rank() == last) continue;
      expect_error(
          [&] { collective.call(*comm, rank_gpu()); }, ErrorKind::Comm,
          {cat("rank ", comm->rank(), "/", comm->size(), " [nccl] ", collective.name,
               " #2: timed out after 200 ms waiting for ", last == 1 ? "rank 1" : cat("all ", comm->size(), " ranks"),
               " to call it; the NCCL communicator is aborted")});
      EXPECT_TRUE(comm->aborted());
      expect_error([&] { comm->barrier(); }, ErrorKind::Comm,
                   {"barrier #3:", cat("broken since ", collective.name, " #2 failed")});
    }
}

// Queued, an all-reduce returns at once and its result is there once wait_queued() returns; a rank that never
// queues the second one makes the others' wait time out, naming the wait, and aborts NCCL.
TEST(NcclFailures, AQueuedCollectiveThatARankNeverCallsTimesOutInTheWait) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator(200ms);
  comm->set_verify_calls(false);  // the call check would wait for the missing rank before anything is queued
  EXPECT_EQ(comm->capture_blocker("the test's all-reduces"), "") << "NCCL can queue: no reason to refuse a capture";
  comm->queue_where_able();
  EXPECT_TRUE(comm->queued());
  const int n = comm->size();
  const Tensor t = Tensor::from_floats(std::vector<float>(5, static_cast<float>(comm->rank())), {5}).to(rank_gpu());
  comm->all_reduce(t, ReduceOp::Sum);
  comm->wait_queued();
  EXPECT_EQ(t.to_floats(), std::vector<float>(5, static_cast<float>(n * (n - 1) / 2)));
  const int last = n - 1;
  if (comm->rank() != last) {
    comm->all_reduce(t, ReduceOp::Sum);  // returns: nothing waits for the others here
    expect_error([&] { comm->wait_queued(); }, ErrorKind::Comm,
                 {cat("rank ", comm->rank(), "/", n,
                      " [nccl] waiting for the queued operations (#2 last): timed out "
                      "after 200 ms waiting for the collectives queued on the stream"),
                  "the NCCL communicator is aborted"});
    EXPECT_TRUE(comm->aborted());
    expect_error([&] { comm->wait_queued(); }, ErrorKind::Comm, {"broken since the wait for the queued operations"});
  }
}

TEST(NcclFailures, CallsThatDifferBetweenRanksAreReportedOnEveryRank) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator();
  const Device gpu = rank_gpu();
  const bool first = comm->rank() == 0;
  expect_error([&] { comm->all_reduce(Tensor::zeros({first ? 100 : 101}, DType::F32, gpu), ReduceOp::Sum); },
               ErrorKind::InvalidArgument,
               {"[nccl] all_reduce #1: the ranks make different calls here: 100 elements on some, 101 elements on "
                "others"});
  expect_error([&] { comm->broadcast(Tensor::zeros({4}, first ? DType::F32 : DType::BF16, gpu), 0); },
               ErrorKind::InvalidArgument, {"broadcast #2:", "dtype f32 on some, dtype bf16 on others"});
  EXPECT_FALSE(comm->aborted());
  Tensor ones = Tensor::from_floats(std::vector<float>{1, 1}, {2}).to(gpu);
  comm->all_reduce(ones, ReduceOp::Sum);
  EXPECT_EQ(ones.to_floats(), std::vector<float>(2, static_cast<float>(comm->size())));
}

TEST(NcclFailures, ATensorOnAnotherDeviceIsRefused) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator();
  expect_error([&] { comm->all_reduce(Tensor::zeros({4}, DType::F32), ReduceOp::Sum); }, ErrorKind::Unsupported,
               {"[nccl] all_reduce #1:", "cannot communicate a tensor on cpu"});
  comm->barrier();
}

TEST(NcclFailures, SplitInheritsTheTimeoutAndTheCallCheck) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator(1234ms);
  comm->set_verify_calls(false);
  auto group = comm->split(comm->rank() % 2, 0);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->timeout(), 1234ms);
  EXPECT_FALSE(dynamic_cast<NcclCommunicator&>(*group).verify_calls());
}

}  // namespace
}  // namespace lab::comm
