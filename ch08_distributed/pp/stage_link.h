// The point-to-point layer of pipeline parallelism: a stage's transfers with its two neighbours, kept apart
// from the schedules (schedule.h says when, this says how).
//
// Forward, the boundary activation [B, T, C] goes to the next stage; backward, its gradient comes back. Each
// is one blocking send or receive on the pipeline group's Communicator (MPI on CPU ranks, NCCL on GPUs),
// with one tag per direction; messages between two stages with one tag arrive in the order they were sent,
// which is the order both schedules agree on (NCCL has no tags, and needs none: each direction between two
// stages carries one kind of message). The Communicator counts the bytes (OpKind::Send, OpKind::Recv).
#pragma once

#include "common/comm/communicator.h"

namespace lab::ch08::pp {

class StageLink {
 public:
  // `pp_group` holds the pipeline's stages ranked by stage (ParallelContext::pp()); it must outlive the link.
  explicit StageLink(comm::Communicator& pp_group) : group_(pp_group) {}

  int stage() const { return group_.rank(); }
  int stages() const { return group_.size(); }
  bool is_first() const { return stage() == 0; }
  bool is_last() const { return stage() == stages() - 1; }

  void send_activation(const Tensor& activation) { group_.send(activation, next(), kActivationTag); }
  void recv_activation(const Tensor& activation) { group_.recv(activation, prev(), kActivationTag); }
  void send_gradient(const Tensor& gradient) { group_.send(gradient, prev(), kGradientTag); }
  void recv_gradient(const Tensor& gradient) { group_.recv(gradient, next(), kGradientTag); }

  comm::Communicator& group() const { return group_; }

 private:
  static constexpr int kActivationTag = 1;
  static constexpr int kGradientTag = 2;

  int prev() const;  // InvalidArgument on the first stage
  int next() const;  // InvalidArgument on the last stage

  comm::Communicator& group_;
};

}  // namespace lab::ch08::pp
