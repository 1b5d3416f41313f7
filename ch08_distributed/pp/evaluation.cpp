// The pipeline's forward-only loss (see evaluation.h).
#include "ch08_distributed/pp/evaluation.h"

#include <vector>

#include "common/ops/reduce.h"

namespace lab::ch08::pp {

double pipeline_loss(const GPT2& model, StageLink& link, const MicroBatch& batch) {
  Tape tape(false);
  Var x;
  if (link.is_first()) {
    x = model.embed(tape, batch.inputs);
  } else {
    MemoryScope scope(MemCategory::Activations);
    const Tensor received =
        Tensor::empty({batch.inputs.dim(0), batch.inputs.dim(1), model.config().n_embd}, DType::F32, model.device());
    link.recv_activation(received);
    x = Var(received, false);
  }
  const Var y = model.forward_blocks(tape, x);
  double loss = 0;
  if (link.is_last()) {
    const Tensor losses = model.head_loss(tape, y, batch.targets);
    loss = ops::sum(losses) / static_cast<double>(losses.numel());
  } else {
    link.send_activation(y.value());
  }
  if (link.stages() == 1) return loss;
  const Tensor t = Tensor::from_floats(std::vector<float>{static_cast<float>(loss)}, {1}, model.device());
  link.group().broadcast(t, link.stages() - 1);
  return t.item();
}

}  // namespace lab::ch08::pp
