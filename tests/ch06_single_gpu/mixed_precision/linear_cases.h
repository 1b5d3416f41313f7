// A random Linear problem and its references, shared by the CPU and CUDA tests of the 16-bit Linear.
#pragma once

#include "common/core/tensor.h"
#include "common/util/rng.h"

namespace lab::test {

// Inputs of one forward and backward: x [N,C], weight [OC,C], bias [OC], dout [N,OC] (CPU, f32).
struct LinearCase {
  Tensor x, weight, bias, dout;
};
LinearCase random_linear_case(int64_t N, int64_t C, int64_t OC, Rng& rng);

// The outputs: out [N,OC], dx [N,C], dweight [OC,C], dbias [OC] (CPU, f32).
struct LinearResult {
  Tensor out, dx, dweight, dbias;
};

// The textbook loops: inputs, weight and dout rounded to `dtype` where a 16-bit product reads them (nothing for
// f32), float products, sums in double when `exact`, else in float in index order; dbias from the fp32 dout.
LinearResult reference_linear(const LinearCase& c, DType dtype, bool exact);

// The 16-bit Linear (low_precision_linear) on `device`: forward, then backward from c.dout.
LinearResult low_precision_linear_on(const LinearCase& c, DType dtype, Device device);

}  // namespace lab::test
