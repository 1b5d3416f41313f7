// One forward and backward of a tiny GPT-2 built with some model rungs (ch10_gpt2/model_rungs.h), and the
// comparison of every compatible combination with the plain model, on a device: what test_model_rungs and its CUDA
// twin share.
#pragma once

#include "common/core/device.h"
#include "common/core/dtype.h"

namespace lab::test {

// For every combination of every_model_rungs(): the incompatible ones refuse with their line; each compatible
// one gives the plain model's per-position losses and flat gradient within `tolerance` (max_scaled_error), with
// matmuls in `matmul` precision. With `activations_16bit`, every combination runs with --activations 16bit against
// the plain model with fp32 activations.
void expect_every_compatible_combination_matches_the_plain_model(Device device, DType matmul, double tolerance,
                                                                 bool activations_16bit = false);

}  // namespace lab::test
