// What the tests of ch06::residual_layernorm with 16-bit activations check on either backend: the fused function
// against ag::residual followed by the LayerNorm (the reference functions it replaces), on the same inputs.
#pragma once

#include "common/core/device.h"
#include "common/core/dtype.h"

namespace lab::test {

// The sum, the normalised output and the gradients of both inputs, the LayerNorm's weight and its bias, all the same
// bits, for `dtype` (bf16, f16) activations on `device`. Row widths that split into 16-byte pieces (the fused CUDA
// kernel's) and one that does not (the unfused fallback); the sum's gradient from another reader (the residual
// stream's next add, added to) and without one (written over).
void expect_residual_layernorm_is_the_unfused_functions(Device device, DType dtype);

}  // namespace lab::test
