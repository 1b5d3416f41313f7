// What the MPI backend does when the ranks do not make the same calls: a rank that never arrives makes
// the others time out with an error naming the operation, its number and the waiting rank; calls that
// differ between ranks are reported on every rank as what differs. Nothing hangs.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "common/comm/mpi_communicator.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;
using lab::testing::fresh_communicator;
using namespace std::chrono_literals;

MpiCommunicator& as_mpi(Communicator& comm) {
  return dynamic_cast<MpiCommunicator&>(comm);
}

struct Collective {
  const char* name;
  std::function<void(Communicator&)> call;
};

// One call of each collective, as every rank would make it.
std::vector<Collective> every_collective() {
  return {
      {"all_reduce", [](Communicator& c) { c.all_reduce(Tensor::zeros({8}, DType::F32), ReduceOp::Sum); }},
      {"reduce_scatter",
       [](Communicator& c) {
         c.reduce_scatter(Tensor::zeros({2 * c.size()}, DType::F32), Tensor::zeros({2}, DType::F32), ReduceOp::Sum);
       }},
      {"all_gather", [](Communicator& c) { c.all_gather(Tensor::zeros({3 * c.size()}, DType::BF16)); }},
      // From the rank that will not arrive: a root that is there may finish its part alone.
      {"broadcast", [](Communicator& c) { c.broadcast(Tensor::zeros({5}, DType::I32), c.size() - 1); }},
      {"barrier", [](Communicator& c) { c.barrier(); }},
      {"split", [](Communicator& c) { c.split(0, c.rank()); }},
  };
}

// The last rank skips the call; every other rank fails within the timeout, and the communicator stays
// broken. With the call check on, the wait that times out is the check's; with it off, the operation's.
TEST(MpiFailures, ARankThatNeverArrivesTimesOutTheOthers) {
  for (bool verify : {true, false})
    for (const Collective& collective : every_collective()) {
      SCOPED_TRACE(cat(collective.name, verify ? " with" : " without", " the call check"));
      auto comm = fresh_communicator(200ms);
      as_mpi(*comm).set_verify_calls(verify);
      comm->barrier();  // #1: everyone is here
      const int last = comm->size() - 1;
      if (comm->rank() == last) continue;
      expect_error([&] { collective.call(*comm); }, ErrorKind::Comm,
                   {cat("rank ", comm->rank(), "/", comm->size(), " [mpi] ", collective.name,
                        " #2: timed out after 200 ms "
                        "waiting for ",
                        last == 1 ? "rank 1" : cat("all ", comm->size(), " ranks"), " to call it")});
      expect_error([&] { comm->barrier(); }, ErrorKind::Comm,
                   {"barrier #3:", cat("broken since ", collective.name, " #2 failed")});
    }
}

// With the call check, each kind of disagreement is an InvalidArgument on every rank, naming the values,
// and leaves the communicator usable (all ranks saw the same disagreement).
TEST(MpiFailures, CallsThatDifferBetweenRanksAreReportedOnEveryRank) {
  auto comm = fresh_communicator();
  const bool first = comm->rank() == 0;

  expect_error([&] { comm->all_reduce(Tensor::zeros({first ? 100 : 101}, DType::F32), ReduceOp::Sum); },
               ErrorKind::InvalidArgument,
               {"all_reduce #1: the ranks make different calls here: 100 elements on some, 101 elements on others"});
  expect_error([&] { comm->all_reduce(Tensor::zeros({4}, first ? DType::F32 : DType::BF16), ReduceOp::Sum); },
               ErrorKind::InvalidArgument, {"all_reduce #2:", "dtype f32 on some, dtype bf16 on others"});
  expect_error([&] { comm->all_reduce(Tensor::zeros({4}, DType::F32), first ? ReduceOp::Sum : ReduceOp::Max); },
               ErrorKind::InvalidArgument, {"reduction sum on some, reduction max on others"});
  expect_error([&] { comm->broadcast(Tensor::zeros({4}, DType::F32), first ? 0 : 1); }, ErrorKind::InvalidArgument,
               {"broadcast #4:", "root 0 on some, root 1 on others"});
  const std::string message = expect_error(
      [&] {
        if (first)
          comm->all_gather(Tensor::zeros({4 * comm->size()}, DType::F32));
        else
          comm->broadcast(Tensor::zeros({4}, DType::F32), 0);
      },
      ErrorKind::InvalidArgument, {"#5:", "all_gather on some, broadcast on others"});
  EXPECT_NE(message.find(first ? "[mpi] all_gather #5" : "[mpi] broadcast #5"), std::string::npos) << message;

  Tensor ones = Tensor::from_floats(std::vector<float>{1, 1}, {2});
  comm->all_reduce(ones, ReduceOp::Sum);
  EXPECT_EQ(ones.to_floats(), std::vector<float>(2, static_cast<float>(comm->size())));
}

TEST(MpiFailures, SplitInheritsTheTimeoutAndTheCallCheck) {
  auto comm = fresh_communicator(1234ms);
  as_mpi(*comm).set_verify_calls(false);
  auto group = comm->split(comm->rank() % 2, 0);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->timeout(), 1234ms);
  EXPECT_FALSE(as_mpi(*group).verify_calls());
}

}  // namespace
}  // namespace lab::comm
