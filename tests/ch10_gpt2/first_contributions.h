// What the tests of a training step's gradients over a buffer holding anything share (CUDA in
// test_first_contributions_cuda.cpp, the CPU in test_first_contributions.cpp). On CUDA the step marks the parameters'
// gradients stale instead of zero-filling them, and each parameter's first contribution writes over its gradient
// (ParameterStore::start_new_gradients, ag::parameter_gradients); on the CPU it zero-fills the buffer. Wherever an op
// added into a stale gradient instead, the step's gradient would carry the values left there; so the parameters'
// gradients are filled with NaNs before each step, which then must give the gradients that backward passes summed
// into a zero-filled buffer give.
#pragma once

#include <cstdint>
#include <string>

#include "common/core/device.h"
#include "common/core/dtype.h"
#include "common/nn/modules.h"

namespace lab::test {

// Two TrainSteps of a tiny GPT-2 (2 blocks, width 32, 2 heads, a block of 16 positions, batches of 2 x 12 tokens,
// so that no position reaches wpe's last 4 rows, whose gradient must still be zeros) on `device`, with the
// gradient buffer filled with NaNs before each, against the same model's gradients by hand for the second step's
// batches (zero_grad, then a Tape's backward per micro-batch). `dtype` f32, or bf16 / f16: the matmuls and the
// activations in it (gpt2_train's --activations 16bit); `options` the model's hooks (chapter 6's fused kernels,
// flash attention); `accum_steps` micro-batches a step. Failures as EXPECT_* naming `what`.
void expect_step_writes_every_gradient(const std::string& what, Device device, DType dtype, ModelOptions options,
                                       int64_t accum_steps);

}  // namespace lab::test
