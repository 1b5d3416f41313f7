// Data parallelism, stage 1: naive. After backward, one all-reduce (average) per gradient tensor, in the
// model's declaration order.
//
// What it is: the definition of data parallelism and nothing more. Each rank computes the gradient of its
// own share of the global batch; the mean over the ranks is the gradient of the whole global batch, so the
// update is the one a single process would make with the whole batch.
//
// What it costs: GPT-2 d12 has 148 gradient tensors, 98 of them biases and LayerNorm parameters of 768 to
// 3072 elements: 148 collectives per step, most of them so small that each costs its latency (tens of
// microseconds between nodes), not its bandwidth. And nothing is sent until backward has finished.
//
// When not to use it: always, except to learn from or to check the other stages against; even a single
// node pays the per-call latency 148 times per step.
#pragma once

#include "common/dist/gradient_reducer.h"

namespace lab::dist {

class NaiveAllReduce : public GradientReducer {
 public:
  NaiveAllReduce(comm::Communicator& group, ParameterStore& params) : GradientReducer(group, params) {}

 protected:
  void reduce() override;
};

}  // namespace lab::dist
