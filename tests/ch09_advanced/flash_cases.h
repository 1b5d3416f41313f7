// What chapter 9's flash attention tests share: a problem shape with its random inputs, and the two ways of
// running attention the tests compare (the materialised op of common/ops/attention.h and the flash op).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "ch09_advanced/kernels/01_attention/attention_reference.h"
#include "common/core/tensor.h"
#include "common/ops/flash_attention.h"
#include "common/ops/grad_write.h"
#include "common/util/rng.h"

namespace lab::test {

struct FlashCase {
  int64_t B, T, NH, HS;
  float spread = 1.0f;  // q and k are N(0, spread): scores of std spread^2, far beyond exp's range at 8
  ch09::AttentionShape shape() const { return {B, T, NH, HS}; }
  std::string name() const;
};
void PrintTo(const FlashCase& c, std::ostream* os);

// f32 CPU tensors: qkv (q and k of N(0, spread), v of N(0, 1)), dout N(0, 1), and the values dqkv holds before
// a backward adds to it, N(0, 1) (an op that overwrites instead of adding fails).
struct FlashInputs {
  Tensor qkv, dout, dqkv_before;
};
FlashInputs random_flash_inputs(const FlashCase& c, Rng& rng);

struct AttentionResult {
  Tensor out, dqkv;  // on the device the op ran on, in its dtype
  Tensor lse;        // flash only
};

// The materialised op (ops::attention_*, f32) on the inputs' device.
AttentionResult run_materialized(const FlashInputs& in, int64_t n_head);
// The flash op (ops::flash_attention_*; the backward by `passes`) on `device` with the inputs converted to `dtype`
// (rounded once, on the CPU); outputs poisoned before the forward, dqkv starting from dqkv_before
// (GradWrite::Add), or poisoned too (Overwrite: every element must be written, none read).
AttentionResult run_flash(const FlashInputs& in, int64_t n_head, DType dtype, Device device,
                          ops::GradWrite write = ops::GradWrite::Add,
                          ops::FlashBackward passes = ops::FlashBackward::TwoPasses);

// The inputs rounded to `dtype` and back to f32: what a 16-bit op reads, as f32, for the references.
FlashInputs rounded_to(const FlashInputs& in, DType dtype);

}  // namespace lab::test
