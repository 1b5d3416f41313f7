// Cases for the tests of ch06::matmul_bias_gelu on either backend: random inputs, the op run on a device, and
// its outputs judged against references computed here in fp64 (f32 cases: within tolerance_for(f32, C); bf16 and
// f16 cases: the low-precision rule against a straightforward 16-bit computation, fp32 accumulation, outputs
// rounded once). The same for GELU's backward epilogue (ch06::matmul_epilogue with Epilogue::GeluGrad).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/core/tensor.h"

namespace lab::test {

struct MatmulOpCase {
  Shape inp_shape;  // [..., C]
  int64_t out_features = 0;
  DType dtype = DType::F32;  // of every tensor
  bool bias = true;
  bool pre_gelu = true;
  std::string name() const;
};
inline void PrintTo(const MatmulOpCase& c, std::ostream* os) {
  *os << c.name();
}

// Tiny; 3-D inputs; widths off every tile; no bias; no pre_gelu; bf16; f16; enough rows for several of the CPU
// path's row blocks with a short last one.
std::vector<MatmulOpCase> matmul_op_cases();

// Runs ch06::matmul_bias_gelu on `device` and checks out (and pre_gelu); failures are gtest failures.
void check_matmul_op_case(const MatmulOpCase& c, Device device, uint64_t seed);

// Runs ch06::matmul_epilogue's GELU backward (Epilogue::GeluGrad) on the case's shapes: a = inp [rows, K], b
// [K, N] (and, the second time, the same b stored transposed, [N, K]), pre_gelu [rows, N], N = out_features; checks
// out = (a @ b) * gelu'(pre_gelu) and that pre_gelu is left as it was. The case's bias and pre_gelu flags are not
// used (the epilogue takes no bias and always reads pre_gelu).
void check_gelu_grad_case(const MatmulOpCase& c, Device device, uint64_t seed);

}  // namespace lab::test
