// GPT-2's tied embedding across pipeline stages.
//
// The LM head multiplies by wte, the token embedding. With two or more stages the first stage (embedding)
// and the last (head) each hold a copy of wte, initialised alike (the same seed draws the same values on
// every layout). Each copy receives only its own part of the gradient: the embedding's on the first stage,
// the head's on the last. As Megatron-LM does, the first and the last stage of each pipeline form an
// "embedding group" and all-reduce (sum) wte's gradient after backward, so both copies hold the whole
// gradient, both optimizers take the same step from the same state, and the copies stay equal without ever
// sending the weights. (The alternative, sending the head's weights from the first stage every step, moves
// the same bytes but adds a transfer on the critical path of the next step's forward.)
//
// Under tensor parallelism each tp rank's slice is tied to the same slice on the other stage: the group pairs
// the ranks of one tp index. With one stage there is one copy and nothing to do.
#pragma once

#include <memory>

#include "common/comm/parallel_context.h"
#include "common/nn/gpt2.h"

namespace lab::ch08::pp {

class TiedEmbedding {
 public:
  // Collective over context.world(): forms the embedding groups (when pp > 1).
  explicit TiedEmbedding(const comm::ParallelContext& context);

  // Sums wte's gradient over this rank's embedding group; nothing on the middle stages or with one stage.
  void all_reduce_gradient(const GPT2& model);
  // This rank's embedding group, or null (a middle stage, or one stage).
  comm::Communicator* group() const { return group_.get(); }

 private:
  std::unique_ptr<comm::Communicator> group_;  // first and last stage of this rank's pipeline, or null
};

}  // namespace lab::ch08::pp
