// The whole model's tensors gathered from the shards of a dp x tp x pp layout, so that a parallel run writes
// the same files as one process (weights in Hugging Face's names and layout, optimizer moments per
// parameter), which any other layout can read back (each rank loads its slice: common/nn/gpt2_weights.h).
//
// For each parameter of the whole model, in canonical order: the stage that holds it (the first one, for
// the tied wte) all-gathers its tp slices and joins them (tp_join), then its tp rank 0 sends the whole
// tensor to stage 0, where world rank 0 collects them. One data-parallel replica is enough (dp index 0);
// the others hold the same values and wait.
#pragma once

#include <memory>
#include <vector>

#include "common/comm/parallel_context.h"
#include "common/io/safetensors.h"
#include "common/nn/gpt2.h"

namespace lab::ch08::tp {

// The whole tensors (the model's layout, wte with model.padded_vocab() rows, on the CPU) of `flat`, a buffer
// laid out like this rank's parameters (the parameters themselves, or an optimizer moment), named by
// parameter, on world rank 0; empty on every other rank. Collective over the context's groups.
std::vector<NamedTensor> gather_whole_tensors(const GPT2& model, const Tensor& flat,
                                              const comm::ParallelContext& context);

// The whole model, with the weights of the shards, built on world rank 0 (null on every other rank), on
// `device`: what rank 0 samples text from in a tensor- or pipeline-parallel run. Collective as above.
std::unique_ptr<GPT2> gather_whole_model(const GPT2& model, const comm::ParallelContext& context, Device device);

}  // namespace lab::ch08::tp
