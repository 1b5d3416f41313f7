// The Communicator contract: the single-process backend (identity and copies, no peers), and the checks,
// sequence numbers, error context and broken state that the base class gives every backend, observed
// through a recording backend that plays one rank of four.
#include <gtest/gtest.h>

#include <vector>

#include "common/comm/device_communicator.h"
#include "common/comm/single_process.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;

Tensor floats(std::vector<float> v, const Shape& shape) {
  return Tensor::from_floats(v, shape);
}

// ---------------------------------------------------------------- single process

TEST(SingleProcess, OneRank) {
  SingleProcessCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.backend(), "single");
}

TEST(SingleProcess, AllReduceInPlaceKeepsTheValues) {
  SingleProcessCommunicator comm;
  const std::vector<float> values = {1.5f, -2.f, 3.25f, 0.f};
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    Tensor t = floats(values, {2, 2});
    comm.all_reduce(t, op);
    EXPECT_EQ(t.to_floats(), values) << reduce_op_name(op);
  }
  Tensor bf16 = floats(values, {4}).to_dtype(DType::BF16);
  comm.all_reduce(bf16, ReduceOp::Avg);
  EXPECT_EQ(bf16.to_floats(), values);
  Tensor ints = Tensor::from_ints(std::vector<int32_t>{7, -3}, {2});
  comm.all_reduce(ints, ReduceOp::Max);
  EXPECT_EQ(ints.to_ints(), (std::vector<int32_t>{7, -3}));
}

TEST(SingleProcess, OutOfPlaceCollectivesCopy) {
  SingleProcessCommunicator comm;
  const Tensor input = floats({1, 2, 3, 4, 5, 6}, {2, 3});

  Tensor reduced = Tensor::zeros({6}, DType::F32);  // same elements, another shape
  comm.all_reduce(input, reduced, ReduceOp::Sum);
  EXPECT_EQ(reduced.to_floats(), input.to_floats());

  Tensor scattered = Tensor::zeros({2, 3}, DType::F32);
  comm.reduce_scatter(input, scattered, ReduceOp::Avg);
  EXPECT_EQ(scattered.to_floats(), input.to_floats());

  Tensor gathered = Tensor::zeros({6}, DType::F32);
  comm.all_gather(input, gathered);
  EXPECT_EQ(gathered.to_floats(), input.to_floats());
  EXPECT_EQ(input.to_floats(), (std::vector<float>{1, 2, 3, 4, 5, 6}));  // inputs untouched
}

TEST(SingleProcess, InPlaceGatherBroadcastAndBarrier) {
  SingleProcessCommunicator comm;
  Tensor buffer = floats({1, 2, 3}, {3});
  comm.all_gather(buffer);
  comm.broadcast(buffer, 0);
  comm.barrier();
  EXPECT_EQ(buffer.to_floats(), (std::vector<float>{1, 2, 3}));
  Tensor tokens = Tensor::zeros({4}, DType::U16);  // gathers and broadcasts move any dtype
  comm.all_gather(tokens, Tensor::zeros({4}, DType::U16));
  EXPECT_EQ(comm.sequence(), 4u);
}

TEST(SingleProcess, SendOrReceiveToSelfExplainsWhy) {
  SingleProcessCommunicator comm;
  Tensor t = Tensor::zeros({2}, DType::F32);
  expect_error([&] { comm.send(t, 0); }, ErrorKind::InvalidArgument,
               {"rank 0/1 [single] send #1", "which is this rank", "deadlock", "no other rank"});
  expect_error([&] { comm.recv(t, 0, 3); }, ErrorKind::InvalidArgument, {"recv #2", "deadlock"});
  expect_error([&] { comm.send(t, 1); }, ErrorKind::InvalidArgument, {"send to rank 1", "not in [0, 1)"});
}

TEST(SingleProcess, ErrorsNameRankOpAndSequenceNumber) {
  SingleProcessCommunicator comm;
  comm.barrier();  // #1
  Tensor ints = Tensor::zeros({4}, DType::I32);
  expect_error([&] { comm.all_reduce(ints, ReduceOp::Avg); }, ErrorKind::InvalidArgument,
               {"rank 0/1 [single] all_reduce #2:", "avg of i32"});
  Tensor tokens = Tensor::zeros({4}, DType::U16);
  expect_error([&] { comm.all_reduce(tokens, ReduceOp::Sum); }, ErrorKind::InvalidArgument,
               {"all_reduce #3", "cannot reduce u16"});
  expect_error([&] { comm.all_reduce(Tensor::zeros({4}, DType::F32), Tensor::zeros({5}, DType::F32), ReduceOp::Sum); },
               ErrorKind::InvalidArgument, {"#4", "4 elements", "output has 5"});
  expect_error([&] { comm.all_reduce(Tensor::zeros({4}, DType::F32), Tensor::zeros({4}, DType::BF16), ReduceOp::Sum); },
               ErrorKind::InvalidArgument, {"#5", "f32", "bf16"});
  expect_error([&] { comm.broadcast(Tensor::zeros({4}, DType::F32), 1); }, ErrorKind::InvalidArgument,
               {"broadcast #6", "root 1"});
  expect_error([&] { comm.all_reduce(Tensor(), ReduceOp::Sum); }, ErrorKind::InvalidArgument, {"#7", "undefined"});
  // Invalid arguments do not break the communicator.
  comm.barrier();
  EXPECT_EQ(comm.sequence(), 8u);
}

TEST(SingleProcess, OverlappingInputAndOutputAreRejected) {
  SingleProcessCommunicator comm;
  const Tensor buf = Tensor::zeros({8}, DType::F32);
  expect_error([&] { comm.all_reduce(buf.view(0, {4}), buf.view(2, {4}), ReduceOp::Sum); }, ErrorKind::InvalidArgument,
               {"overlap"});
  expect_error([&] { comm.reduce_scatter(buf.view(0, {4}), buf.view(0, {4}), ReduceOp::Sum); },
               ErrorKind::InvalidArgument, {"overlap"});
}

TEST(SingleProcess, SplitMakesAGroupOrNone) {
  SingleProcessCommunicator comm;
  comm.set_timeout(std::chrono::seconds(7));
  std::unique_ptr<Communicator> group = comm.split(3, 0);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(group->timeout(), std::chrono::seconds(7));
  EXPECT_EQ(group->sequence(), 0u);
  EXPECT_EQ(comm.split(kNoGroup, 0), nullptr);
  expect_error([&] { comm.split(-2, 0); }, ErrorKind::InvalidArgument, {"split #3", "color -2"});
}

// Only a backend on a device stream can leave its collectives queued; the others complete them, and waiting for
// what is queued returns at once.
TEST(SingleProcess, CannotQueueItsOperationsOnAStream) {
  SingleProcessCommunicator comm;
  EXPECT_FALSE(comm.can_queue());
  expect_error([&] { comm.set_queued(true); }, ErrorKind::InvalidArgument,
               {"the single backend completes every operation before it returns"});
  EXPECT_FALSE(comm.queued());
  comm.set_queued(false);
  comm.wait_queued();
  comm.queue_where_able();
  EXPECT_FALSE(comm.queued());
  EXPECT_EQ(comm.capture_blocker("the test's all-reduces"), "") << "one rank has nothing to exchange";
}

TEST(SingleProcess, TimeoutMustBePositive) {
  SingleProcessCommunicator comm;
  expect_error([&] { comm.set_timeout(std::chrono::milliseconds(0)); }, ErrorKind::InvalidArgument, {"timeout"});
  comm.set_timeout(std::chrono::milliseconds(250));
  EXPECT_EQ(comm.timeout(), std::chrono::milliseconds(250));
}

TEST(SingleProcess, TrafficCountsCompletedCallsAndTheirPayload) {
  SingleProcessCommunicator comm;
  comm.all_reduce(Tensor::zeros({10}, DType::F32), ReduceOp::Sum);
  comm.all_reduce(Tensor::zeros({2, 3}, DType::BF16), ReduceOp::Max);
  comm.all_gather(Tensor::zeros({3}, DType::U16), Tensor::zeros({3}, DType::U16));
  comm.barrier();
  expect_error([&] { comm.all_reduce(Tensor::zeros({4}, DType::F32), Tensor::zeros({5}, DType::F32), ReduceOp::Sum); },
               ErrorKind::InvalidArgument);
  EXPECT_EQ(comm.traffic(OpKind::AllReduce).calls, 2u);  // the failed call is not counted
  EXPECT_EQ(comm.traffic(OpKind::AllReduce).bytes, 40u + 12u);
  EXPECT_EQ(comm.traffic(OpKind::AllGather).calls, 1u);
  EXPECT_EQ(comm.traffic(OpKind::AllGather).bytes, 6u);
  EXPECT_EQ(comm.traffic(OpKind::Barrier).calls, 1u);
  EXPECT_EQ(comm.traffic(OpKind::Barrier).bytes, 0u);
  EXPECT_EQ(comm.traffic(OpKind::Broadcast).calls, 0u);
  comm.reset_traffic();
  EXPECT_EQ(comm.traffic(OpKind::AllReduce).calls, 0u);
  EXPECT_EQ(comm.traffic(OpKind::AllReduce).bytes, 0u);
}

// ---------------------------------------------------------------- a device's communicator

TEST(DeviceCommunicator, AWorldOfOneRankGivesTheSingleProcessCommunicator) {
  SingleProcessCommunicator world;
  world.set_timeout(std::chrono::milliseconds(1234));
  const auto on_cpu = communicator_for(world, Device::cpu());
  EXPECT_EQ(on_cpu->backend(), "single");
  EXPECT_EQ(on_cpu->timeout(), std::chrono::milliseconds(1234));
  if (cuda_available()) {
    EXPECT_EQ(communicator_for(world, Device::cuda(0))->backend(), "single");
  }
}

TEST(DeviceCommunicator, AGpuThatIsNotThereIsRefused) {
  SingleProcessCommunicator world;
#ifdef LAB_WITH_CUDA
  expect_error([&] { communicator_for(world, Device::cuda(99)); }, ErrorKind::InvalidArgument, {"cuda:99"});
#else
  expect_error([&] { communicator_for(world, Device::cuda(0)); }, ErrorKind::Unsupported, {"this build has no CUDA"});
#endif
}

TEST(Communicator, BusFactorsAreThoseOfTheRingAlgorithms) {
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::AllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::Broadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::Send, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::Barrier, 4), 0.0);
  expect_error([] { bus_factor(OpKind::AllReduce, 0); }, ErrorKind::InvalidArgument, {"0 ranks"});
  EXPECT_STREQ(op_kind_name(OpKind::ReduceScatter), "reduce_scatter");
}

// ---------------------------------------------------------------- the contract, seen by a backend

// Rank 2 of 4: records what reaches the backend, and fails a barrier the way a timed-out collective
// of a real backend would.
class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator() : Communicator(2, 4) {}
  std::string backend() const override { return "recording"; }

  std::vector<std::string> calls;
  const void* gather_input = nullptr;
  bool fail_barrier = false;

 protected:
  bool supports(Device device) const override { return device.is_cpu(); }
  void do_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) override {
    calls.push_back(cat("all_reduce ", reduce_op_name(op), same_memory(in, out) ? " in place" : ""));
  }
  void do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override { calls.push_back("reduce_scatter"); }
  void do_all_gather(const Tensor& in, const Tensor&) override {
    gather_input = in.raw();
    calls.push_back(cat("all_gather of ", in.numel()));
  }
  void do_broadcast(const Tensor&, int root) override { calls.push_back(cat("broadcast from ", root)); }
  void do_barrier() override {
    LAB_CHECK(!fail_barrier, Comm, "timed out after ", timeout().count(), " ms waiting for ranks 0, 3");
    calls.push_back("barrier");
  }
  void do_send(const Tensor&, int peer, int tag) override { calls.push_back(cat("send to ", peer, " tag ", tag)); }
  void do_recv(const Tensor&, int peer, int tag) override { calls.push_back(cat("recv from ", peer, " tag ", tag)); }
  std::unique_ptr<Communicator> do_split(int, int) override { return nullptr; }
};

TEST(CommunicatorContract, BlocksAreSizedByTheNumberOfRanks) {
  RecordingCommunicator comm;
  const Tensor input = Tensor::zeros({12}, DType::F32);
  comm.reduce_scatter(input, Tensor::zeros({3}, DType::F32), ReduceOp::Sum);
  expect_error([&] { comm.reduce_scatter(input, Tensor::zeros({4}, DType::F32), ReduceOp::Sum); },
               ErrorKind::InvalidArgument,
               {"rank 2/4 [recording] reduce_scatter #2", "size (4) x output (4 elements)"});
  comm.all_gather(Tensor::zeros({3}, DType::F32), input);
  expect_error([&] { comm.all_gather(Tensor::zeros({4}, DType::F32), input); }, ErrorKind::InvalidArgument,
               {"size (4) x input (4 elements)"});
  EXPECT_EQ(comm.calls, (std::vector<std::string>{"reduce_scatter", "all_gather of 3"}));
}

TEST(CommunicatorContract, InPlaceFormsReachTheBackendAsSuch) {
  RecordingCommunicator comm;
  const Tensor buffer = Tensor::zeros({12}, DType::F32);
  comm.all_reduce(buffer, ReduceOp::Avg);
  comm.all_reduce(buffer, Tensor::zeros({12}, DType::F32), ReduceOp::Max);
  comm.all_gather(buffer);  // this rank's block is elements [6, 9)
  EXPECT_EQ(comm.gather_input, static_cast<const char*>(buffer.raw()) + 6 * sizeof(float));
  comm.all_gather(buffer.view(6, {3}), buffer);  // the same, spelled out
  expect_error([&] { comm.all_gather(buffer.view(3, {3}), buffer); }, ErrorKind::InvalidArgument,
               {"without being block 2"});
  expect_error([&] { comm.all_gather(Tensor::zeros({10}, DType::F32)); }, ErrorKind::InvalidArgument,
               {"10 elements", "4 equal blocks"});
  EXPECT_EQ(comm.calls, (std::vector<std::string>{"all_reduce avg in place", "all_reduce max", "all_gather of 3",
                                                  "all_gather of 3"}));
}

TEST(CommunicatorContract, PointToPointNeedsAnotherRank) {
  RecordingCommunicator comm;
  const Tensor t = Tensor::zeros({2}, DType::F32);
  comm.send(t, 3, 5);
  comm.recv(t, 1);
  expect_error([&] { comm.send(t, 2); }, ErrorKind::InvalidArgument, {"send to rank 2, which is this rank"});
  expect_error([&] { comm.recv(t, 4); }, ErrorKind::InvalidArgument, {"not in [0, 4)"});
  expect_error([&] { comm.send(t, 1, -1); }, ErrorKind::InvalidArgument, {"tag -1"});
  comm.broadcast(t, 3);
  EXPECT_EQ(comm.calls, (std::vector<std::string>{"send to 3 tag 5", "recv from 1 tag 0", "broadcast from 3"}));
}

TEST(CommunicatorContract, ACommunicationFailureBreaksTheCommunicator) {
  RecordingCommunicator comm;
  comm.set_timeout(std::chrono::milliseconds(1500));
  comm.barrier();
  comm.fail_barrier = true;
  expect_error([&] { comm.barrier(); }, ErrorKind::Comm,
               {"rank 2/4 [recording] barrier #2:", "timed out after 1500 ms"});
  comm.fail_barrier = false;
  const Tensor t = Tensor::zeros({4}, DType::F32);
  expect_error([&] { comm.all_reduce(t, ReduceOp::Sum); }, ErrorKind::Comm,
               {"all_reduce #3", "broken since barrier #2 failed"});
  EXPECT_EQ(comm.calls, std::vector<std::string>{"barrier"});
}

}  // namespace
}  // namespace lab::comm
