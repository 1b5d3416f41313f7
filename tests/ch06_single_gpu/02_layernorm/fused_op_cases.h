// Cases for the tests of ch06::fused_residual_layernorm on either backend: random inputs, the gradients a
// backward call may pass (dresidual, da, db each optional; da may be dresidual itself), the op's results on a
// device, and the same results through the core's unfused CPU ops, which are the reference.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/lab/compare.h"
#include "common/util/rng.h"

namespace lab::test {

// Inputs on the CPU: a = offset + N(0, 1), b = N(0, 1), weight N(1, 0.5), bias N(0, 0.5), dout and dresidual
// N(0, 1); the accumulated gradients da, db, dweight, dbias start from N(0, 1) values.
struct FusedInputs {
  Tensor a, b, weight, bias, dout, dresidual, da, db, dweight, dbias;
};
FusedInputs random_fused_inputs(int64_t N, int64_t C, float offset, Rng& rng);

// The gradients a backward call passes.
struct GradientSet {
  bool dresidual = true;
  bool da = true;
  bool db = true;
  bool da_is_dresidual = false;  // da passed as the dresidual tensor itself
  // dweight and dbias written over (GradWrite::Overwrite, a training step's first contribution to them): they start
  // as NaNs for the fused op, as zeros for the reference.
  bool params_written_over = false;
  std::string name() const;
};
inline void PrintTo(const GradientSet& g, std::ostream* os) {
  *os << g.name();
}
// Every combination worth telling apart: all, none optional, each left out, da aliasing dresidual, the parameters'
// gradients written over.
std::vector<GradientSet> gradient_sets();

// Forward, then backward from the forward's own residual, mean and rstd. Gradients not passed stay undefined.
struct FusedResults {
  Tensor residual, out, mean, rstd, da, db, dweight, dbias;
};
// Through ch06::fused_residual_layernorm_* on `device`.
FusedResults run_fused(const FusedInputs& in, const GradientSet& g, Device device);
// Through the core's CPU ops: residual_forward, layernorm_forward; the LayerNorm's dx added onto a copy of
// dresidual (zeros without one), then residual_backward.
FusedResults run_unfused_reference(const FusedInputs& in, const GradientSet& g);

// Every defined result of `actual` within `tol` of `expected` (as EXPECT_TRUE failures naming the tensor).
void expect_results_close(const FusedResults& actual, const FusedResults& expected, Tolerance tol);

// With no rows, dweight and dbias are sums over nothing: written over (GradWrite::Overwrite) from NaNs, they hold
// zeros, through both backward entry points on `device` (f32 activations take the first, 16-bit ones the second).
void expect_no_rows_give_zero_param_grads(Device device);

}  // namespace lab::test
