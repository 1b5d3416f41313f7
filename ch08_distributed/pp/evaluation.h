// A forward pass through the pipeline without gradients, for the validation loss: the first stage embeds
// the batch and runs its blocks, each stage passes its output on, the last computes the loss, and every stage
// receives it. With one stage it is the model's own loss.
#pragma once

#include "ch08_distributed/pp/stage_link.h"
#include "common/nn/gpt2.h"
#include "common/train/train_step.h"

namespace lab::ch08::pp {

// The mean loss over the batch's positions, on every stage of the pipeline. Collective over link.group().
double pipeline_loss(const GPT2& model, StageLink& link, const MicroBatch& batch);

}  // namespace lab::ch08::pp
