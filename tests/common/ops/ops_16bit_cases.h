// What the tests of the 16-bit paths of GELU, residual, LayerNorm, the linear layer's forward, the embedding and the
// classifier share (common/ops/gelu.h, residual.h, layernorm.h, linear.h, embedding.h, classifier.h; CPU in
// tests/common/ops, CUDA in tests/common/cuda): each op run in bf16 or f16 on a device, against the f32 op on the CPU
// on the same inputs, its results rounded to the 16-bit type. The CPU f32 op is the reference for the CUDA ops too, so
// that a formula the 16-bit CUDA kernel gets wrong is caught even where its f32 instantiation shares the mistake.
//
// The bound: one ulp of the 16-bit type, and nearly every element exact. Both sides load the same values (the inputs
// are drawn exact in the 16-bit type), compute in fp32 and round each result once, to nearest: when their fp32 results
// agree, so do the roundings. Where they differ in the last bits (another summation order: a warp tree on the GPU, a
// CPU loop that the f16 conversion keeps from vectorising as the f32 one does; expf against exp_fast), the rounded
// value can cross one rounding boundary, never two, since a 16-bit ulp is 2^13 (f16) or 2^16 (bf16) f32 ulps. Results
// that cancel to near zero (LayerNorm's out and dx, the linear layer's out) are the exception: there an f32 difference
// within tolerance_for(f32, the length of the sums behind the element) of the tensor's scale may be several of their
// own 16-bit ulps, and is allowed. Such elements are rare (at most 0.25% measured: 54 of 49152 for the CPU f16
// LayerNorm at C = 768, 14 of 6144 for the emulated CUDA f16 linear layer), so at most 1% may differ at all: truncating
// instead of rounding to nearest moves about half of them, and a wrong formula most of them far beyond one ulp. The f32
// tensors of a 16-bit call (LayerNorm's statistics, dw, db; the embedding's dwte, dwpe; the classifier's losses) are
// judged by tolerance_for(f32, the length of their sums).
//
// The embedding's out is one f32 addition on both sides, so every element is exact. The classifier's gradient scales
// a whole row by 1 / (a sum over the vocabulary): the CPU runs the f32 op's loop on a widened copy of each row (every
// element exact), while CUDA's summation order and expf move a row's scale by a few f32 ulps, which crossed an f16
// rounding boundary in at most 11 of 150912 elements measured (emulated CUDA, GPT-2's padded vocabulary, logits
// around 100).
//
// A 16-bit linear out with a 16-bit addend (a 16-bit bias, or dinp accumulated onto its 16-bit starting values):
// cuBLASLt may round the product to the 16-bit type before it adds the addend, then round the sum (an H200 did,
// for some algorithms: common/cuda/emulation/README.md; the emulator always does). Where the sum cancels, the
// first rounding is an ulp of the product, several of the result's. Such outputs match the f32 sum rounded once
// within one ulp, or the product rounded, plus the addend, rounded again, within one ulp of the product and one
// of the result (either rounding may cross a boundary where the two sides' fp32 sums differ in the last bits).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iosfwd>
#include <string>

#include "common/core/tensor.h"
#include "common/ops/classifier.h"
#include "common/util/rng.h"

namespace lab::test {

// The parameter of the tests: the 16-bit dtype, printed by its name (CTest lists ".../bf16  # GetParam() = bf16").
struct Storage16 {
  DType dtype;
};
void PrintTo(const Storage16& s, std::ostream* os);
inline std::string storage16_name(const ::testing::TestParamInfo<Storage16>& info) {
  return dtype_name(info.param.dtype);
}
inline auto storage16_values() {
  return ::testing::Values(Storage16{DType::BF16}, Storage16{DType::F16});
}

// `actual` (bf16 or f16, any device) within one ulp of `expected` (f32, any device) rounded to actual's dtype (or
// within the f32 tolerance of `reduction_length` of it), and equal to it in all but 1% of the elements (one at any
// size): the bound above. NaN anywhere fails. `inexact_fraction`: how many elements may differ by that one ulp
// (1.0: any), for inputs that take so few distinct values that one fp32 difference moves many elements together.
// `rounded_twice` (when `product` is defined, both f32 of actual's shape): a second reference, round(round(product)
// + addend) in actual's dtype, within one ulp of the rounded product and one of the result (the header); each
// element may match either reference, and counts as inexact only when it differs from both.
struct RoundedTwice {
  Tensor product, addend;
};
::testing::AssertionResult within_one_ulp(const char* what, const Tensor& actual, const Tensor& expected,
                                          int64_t reduction_length, double inexact_fraction = 0.01,
                                          const RoundedTwice& rounded_twice = {});

// gelu_forward and gelu_backward (dx starting from random values, and written over a NaN-filled dx) on n elements.
void expect_gelu_matches_f32(DType dtype, Device device, int64_t n, Rng& rng);
// residual_forward and residual_backward (da, db starting from random values) on n elements.
void expect_residual_matches_f32(DType dtype, Device device, int64_t n, Rng& rng);
// layernorm_forward and layernorm_backward (dx, dw, db starting from random values) on [N, C], rows with mean 3
// and std 2; weight and bias f32 as layernorm.h asks.
void expect_layernorm_matches_f32(DType dtype, Device device, int64_t N, int64_t C, Rng& rng);
// linear_forward with inp and weight in the 16-bit type on [N, C] -> [N, OC], with an f32 bias and without: a 16-bit
// out within one ulp, an f32 out within tolerance_for(f32, C); and a 16-bit out with a 16-bit bias within one ulp.
// The reference is the f32 op on the same values.
void expect_linear_forward_matches_f32(DType dtype, Device device, int64_t N, int64_t C, int64_t OC, Rng& rng);
// linear_backward with 16-bit activations: dout, inp, weight and dinp in the 16-bit type (dinp accumulated onto its
// starting values, and written over a NaN-filled dinp), dweight and dbias f32; the reference is the f32 op on the
// same values.
void expect_linear_backward_matches_f32(DType dtype, Device device, int64_t N, int64_t C, int64_t OC, Rng& rng);
// linear_backward, layernorm_backward and embedding_backward over no rows ([0, C] inputs, a [0, T] batch): their
// parameters' gradients (dweight and dbias, dwpe) are sums over nothing, so written over (GradWrite::Overwrite) from
// NaNs they hold zeros, and added into (Add) they keep their values.
void expect_no_rows_give_zero_param_grads(DType dtype, Device device);

// embedding_forward with a 16-bit out and embedding_backward with a 16-bit dout on tokens [B, T] drawn from
// [0, distinct) of a vocabulary of Vp rows (a small `distinct`: many repeated tokens), C channels; wte, wpe, dwte and
// dwpe f32 as embedding.h asks (wte and wpe not exact in the 16-bit type; dwte and dwpe starting from random values).
// The gradients are f32, judged by tolerance_for(f32, B*T) and (f32, B); dwpe is also written over from NaNs
// (GradWrite::Overwrite), rows past T included.
void expect_embedding_matches_f32(DType dtype, Device device, int64_t B, int64_t T, int64_t C, int64_t Vp,
                                  int64_t distinct, Rng& rng);
// fused_classifier on 16-bit logits [N, Vp] drawn N(offset, 2) (the padded columns [vocab, Vp) random too) with
// `dloss`: the f32 losses by tolerance_for(f32, vocab), the gradient over the logits within one ulp (zeros in the
// padded columns), and with dloss = 0 the logits left as they were, bit for bit. `classifier`: the implementation
// on `device` (another op with the contract of common/ops/classifier.h, such as ch06::fused_classifier); the
// reference is always ops::fused_classifier on the CPU.
void expect_classifier_matches_f32(DType dtype, Device device, int64_t N, int64_t vocab, int64_t Vp, float offset,
                                   float dloss, Rng& rng, ops::ClassifierFn classifier = ops::fused_classifier);

// The dtype mixes the six ops refuse, each with InvalidArgument naming the dtypes or the tensor.
void expect_mixed_dtypes_invalid(Device device);

}  // namespace lab::test
