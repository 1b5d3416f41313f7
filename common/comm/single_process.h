// The single-process communicator: one rank, so every collective is the identity (in place) or a copy
// (out of place), and there is no peer for point-to-point. It lets every distributed code path run,
// unchanged, in a plain single-process program and in the no-GPU quick start.
#pragma once

#include <memory>

#include "common/comm/communicator.h"

namespace lab::comm {

class SingleProcessCommunicator final : public Communicator {
 public:
  SingleProcessCommunicator() : Communicator(0, 1) {}
  std::string backend() const override { return "single"; }

 protected:
  bool supports(Device device) const override;
  void do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, const Tensor& output) override;
  void do_broadcast(const Tensor& tensor, int root) override;
  void do_barrier() override;
  void do_send(const Tensor& tensor, int peer, int tag) override;
  void do_recv(const Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
};

}  // namespace lab::comm
