// The last step of stage 4 (pinned_loader.h), on the GPU: B*T+1 u16 tokens, copied to the device as
// they are stored, widened into the i32 inputs and targets the model takes. Moving u16 halves the bytes
// that cross the bus; the widening costs the GPU next to nothing. Plain C++ header; the kernel is in
// widen_tokens.cu, compiled only with LAB_WITH_CUDA.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"

namespace lab::ch05 {

// tokens: u16 [B*T+1] on a GPU; inputs and targets: i32 [B, T] on the same GPU. Queued on the device's
// current stream: inputs[i] = tokens[i], targets[i] = tokens[i + 1].
void widen_tokens_on_device(const Tensor& tokens, const Tensor& inputs, const Tensor& targets);

}  // namespace lab::ch05
