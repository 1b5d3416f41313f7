// CPU offload of the optimizer (`--offload optimizer`): AdamW's moments and an fp32 master copy of the
// parameters live in pinned host memory, and the update runs on the CPU (DeepSpeed's ZeRO-Offload does the
// same for the optimizer state and step).
//
// What changes from the previous rung (AdamW on the device, common/optim/adamw.h): where the state is, and who
// computes the update. After backward the gradients are copied down to the host, the CPU updates the master
// copy with the host moments, and the parameters are copied up; the GPU then holds parameters, gradients and
// activations only, 8 bytes per parameter less (fp32 AdamW). The master copy is taken from the model at the
// first step, so weights loaded before it (--init, --resume) are the ones trained.
//
// What it costs: two transfers of the whole model per step (4 bytes per parameter each way) and an update at
// the CPU's memory bandwidth instead of the GPU's. The step cuts them into chunks (common/optim/
// offload_pipeline.h): the CPU updates each chunk as soon as its gradients are down while the next ones come
// down and the previous ones go up on a copy stream, and the step returns while the last chunks go up, the
// next step's kernels waiting for them on the GPU. When not to use it: when the state fits on the GPU.
//
// With parameters on the CPU (a CPU run) the state is in host memory already: offloading changes nothing, and
// the optimizer is the ordinary one. The training result is unchanged either way (tests/ch07_memory/offload:
// on CUDA in the emulation build, against AdamW on the device).
#pragma once

#include <memory>

#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"

namespace lab::ch07 {

// The transfers in chunks of `chunk_elements` (common/optim/offload_pipeline.h).
std::unique_ptr<AdamW> make_offloaded_optimizer(GPT2& model, const AdamWConfig& config,
                                                int64_t chunk_elements = kOffloadChunkElements);

}  // namespace lab::ch07
