// What the batched attention tests share (common/ops/batched_attention.h; CPU in tests/common/ops, CUDA in
// tests/common/cuda): a problem shape and dtype, random inputs exact in that dtype, the op run on a device, and
// the checks that hold for any correct result: zeros above the diagonal, rows that sum to 1.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iosfwd>
#include <string>

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"
#include "common/util/rng.h"

namespace lab::test {

struct BatchedCase {
  int64_t B, T, NH, HS;
  DType dtype;
  // When set, every key's first feature is this: query t's scores all shift by q[t,0] * key_offset / sqrt(HS),
  // which the softmax ignores but exp does not (at 1000 and head size 64, shifts of a few hundred: exp overflows
  // f32 unless the row's max is subtracted first).
  float key_offset = 0.0f;
  std::string name() const;
};
void PrintTo(const BatchedCase& c, std::ostream* os);

// The unit roundoff of a 16-bit dtype, half its machine epsilon: 2^-8 for bf16, 2^-11 for f16. Rounding to
// nearest moves a value x by at most u |x|.
double unit_roundoff(DType dtype);

// f32 CPU tensors whose values are exact in c.dtype (drawn N(0, 1), then rounded; the key offset above, exact in
// both 16-bit types): qkv, dout, and the values
// dqkv holds before the backward adds to it (an op that overwrites instead of adding fails every comparison).
struct BatchedInputs {
  Tensor qkv, dout, dqkv_before;
};
BatchedInputs random_batched_inputs(const BatchedCase& c, Rng& rng);

struct BatchedResult {
  Tensor out, probs, dqkv;  // f32 on the CPU
};
// ops::batched_attention_forward and _backward on `device` in c.dtype: outputs poisoned (NaN) before the forward,
// dqkv starting from dqkv_before (GradWrite::Add), or poisoned too (Overwrite: every element written, none read).
BatchedResult run_batched(const BatchedInputs& in, const BatchedCase& c, Device device,
                          ops::GradWrite write = ops::GradWrite::Add);
// GradWrite::Overwrite from a dqkv of NaNs against adding into zeros, for case `c` with inputs from `seed` on
// `device`, within `tol` (relative and absolute) of each other.
::testing::AssertionResult overwrite_matches_adding_into_zeros(const BatchedCase& c, uint64_t seed, Device device,
                                                               double tol);
// ops::attention_forward and _backward (f32, CPU) on the same inputs.
BatchedResult run_f32_attention(const BatchedInputs& in, const BatchedCase& c);

// Every probability above the diagonal exactly 0, and each row's sum within u + 1e-5 of 1: each stored P is
// the f32 probability rounded (relative error at most u, so the row's sum moves by at most u), and the f32
// probabilities sum to 1 up to f32 rounding over at most a few hundred terms (1e-5).
::testing::AssertionResult causal_rows_sum_to_one(const Tensor& probs, DType dtype);

// The part of dqkv [B,T,3C] that is q (part 0), k (1) or v (2), as [B,T,C].
Tensor dqkv_part(const Tensor& dqkv, int part);

}  // namespace lab::test
