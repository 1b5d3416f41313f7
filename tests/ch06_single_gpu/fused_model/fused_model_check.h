// What the fused model's tests check on either backend: a GPT-2 running --kernels fused on `device` against the
// reference GPT-2 on the CPU, both initialised from the same seed.
#pragma once

#include <gtest/gtest.h>

#include "common/core/device.h"

namespace lab::test {

// Logits (forward only), per-position losses, and the gradient of every parameter after one backward.
void expect_fused_matches_reference(Device device);

// A few AdamW steps on the same batches: each step's loss and gradient norm, and the final weights.
void expect_fused_training_tracks_reference(Device device);

}  // namespace lab::test
