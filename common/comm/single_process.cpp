// With one rank, a reduction over ranks is the rank's own tensor (the average of one value is itself),
// a scatter's only block and a gather's only block are the whole tensor, and a broadcast from rank 0 to
// rank 0 moves nothing.
#include "common/comm/single_process.h"

namespace lab::comm {

namespace {

void copy_unless_in_place(const Tensor& input, const Tensor& output) {
  if (input.raw() != output.raw()) output.copy_from(input);  // same element count; shapes may differ
}

}  // namespace

// Any device: the copies go through copy_bytes, which reports a CUDA tensor in a CPU-only build itself.
bool SingleProcessCommunicator::supports(Device) const {
  return true;
}

void SingleProcessCommunicator::do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp) {
  copy_unless_in_place(input, output);
}

void SingleProcessCommunicator::do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp) {
  copy_unless_in_place(input, output);
}

void SingleProcessCommunicator::do_all_gather(const Tensor& input, const Tensor& output) {
  copy_unless_in_place(input, output);
}

void SingleProcessCommunicator::do_broadcast(const Tensor&, int) {}

void SingleProcessCommunicator::do_barrier() {}

// The base class rejects every peer of a one-rank communicator (the only rank is this one), so these are
// reached only if that check is broken.
void SingleProcessCommunicator::do_send(const Tensor&, int peer, int) {
  fail(ErrorKind::Internal, "single-process send to rank ", peer, " passed the peer check");
}

void SingleProcessCommunicator::do_recv(const Tensor&, int peer, int) {
  fail(ErrorKind::Internal, "single-process recv from rank ", peer, " passed the peer check");
}

std::unique_ptr<Communicator> SingleProcessCommunicator::do_split(int color, int) {
  if (color == kNoGroup) return nullptr;
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace lab::comm
