#include "tests/common/ops/ops_16bit_cases.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/lab/compare.h"
#include "common/ops/classifier.h"
#include "common/ops/embedding.h"
#include "common/ops/gelu.h"
#include "common/ops/layernorm.h"
#include "common/ops/linear.h"
#include "common/ops/residual.h"
#include "tests/common/expect_error.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

// The 16-bit patterns of a bf16 or f16 tensor (any device).
std::vector<uint16_t> bits_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  std::vector<uint16_t> bits(static_cast<size_t>(host.numel()));
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = host.dtype() == DType::BF16 ? host.data<Bf16>()[i].bits : host.data<F16>()[i].bits;
  return bits;
}

bool is_nan(uint16_t bits, DType dtype) {
  return dtype == DType::BF16 ? std::isnan(bf16_bits_to_float(bits)) : std::isnan(f16_bits_to_float(bits));
}

// Sign-magnitude to an integer that orders as the values do (+0 and -0 both 0): the difference of two is their
// distance in ulps, across zero too.
int32_t ordered(uint16_t bits) {
  const int32_t magnitude = bits & 0x7fff;
  return (bits & 0x8000) ? -magnitude : magnitude;
}

// f32 CPU values drawn N(offset, std), then rounded to `dtype`: exact in it, so both sides of a comparison load the
// same numbers.
Tensor exact_in(DType dtype, const Shape& shape, Rng& rng, float offset = 0.0f, float std = 1.0f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = offset + std * rng.normal();
  return Tensor::from_floats(v, shape).to_dtype(dtype).to_dtype(DType::F32);
}

Tensor narrow_on(const Tensor& t, DType dtype, Device device) {
  return t.to_dtype(dtype).to(device);
}
Tensor poisoned_narrow(const Shape& shape, DType dtype, Device device) {
  return narrow_on(poisoned(shape, Device::cpu()), dtype, device);
}

}  // namespace

void PrintTo(const Storage16& s, std::ostream* os) {
  *os << dtype_name(s.dtype);
}

::testing::AssertionResult within_one_ulp(const char* what, const Tensor& actual, const Tensor& expected,
                                          int64_t reduction_length, double inexact_fraction,
                                          const RoundedTwice& rounded_twice) {
  const DType dtype = actual.dtype();
  if (dtype != DType::BF16 && dtype != DType::F16)
    return ::testing::AssertionFailure() << what << ": " << dtype_name(dtype) << ", expected bf16 or f16";
  if (actual.numel() != expected.numel())
    return ::testing::AssertionFailure() << what << ": " << actual.numel() << " elements, expected "
                                         << expected.numel();
  const std::vector<float> exact = expected.to_floats();
  const std::vector<uint16_t> got = bits_of(actual), want = bits_of(expected.to(Device::cpu()).to_dtype(dtype));
  const auto value = [&](uint16_t b) { return dtype == DType::BF16 ? bf16_bits_to_float(b) : f16_bits_to_float(b); };
  // The spacing of the 16-bit values at b's magnitude.
  const auto ulp = [&](uint16_t b) {
    const uint16_t magnitude = b & 0x7fff;
    return static_cast<double>(value(static_cast<uint16_t>(magnitude + 1))) - value(magnitude);
  };
  // The second reference: the product rounded, plus the addend, rounded again (and the rounded product).
  const bool two_references = rounded_twice.product.defined();
  std::vector<uint16_t> product_bits(got.size()), twice(got.size());
  if (two_references) {
    product_bits = bits_of(rounded_twice.product.to_dtype(dtype));
    const std::vector<float> addend = rounded_twice.addend.to_floats();
    std::vector<float> sum(got.size());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = value(product_bits[i]) + addend[i];
    twice = bits_of(Tensor::from_floats(sum, {static_cast<int64_t>(sum.size())}).to_dtype(dtype));
  }
  double scale = 0;
  for (float e : exact) scale = std::max(scale, std::fabs(static_cast<double>(e)));
  const Tolerance f32 = tolerance_for(DType::F32, reduction_length);
  int64_t inexact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int32_t ulps = std::abs(ordered(got[i]) - ordered(want[i]));
    const double difference = std::fabs(static_cast<double>(value(got[i])) - value(want[i]));
    const double f32_allowance = f32.rel * std::fabs(exact[i]) + f32.abs * scale;
    const bool once = !is_nan(want[i], dtype) && (ulps <= 1 || difference <= f32_allowance);
    const double difference_twice = std::fabs(static_cast<double>(value(got[i])) - value(twice[i]));
    const bool matches_twice =
        two_references && !is_nan(twice[i], dtype) && difference_twice <= ulp(product_bits[i]) + ulp(twice[i]);
    if (is_nan(got[i], dtype) || !(once || matches_twice))
      return ::testing::AssertionFailure()
             << what << " [" << i << "]: " << value(got[i]) << ", expected " << value(want[i]) << " ("
             << dtype_name(dtype) << "), " << ulps << " ulps"
             << (two_references ? ", or " + std::to_string(value(twice[i])) + " with the product rounded first"
                                : std::string());
    inexact += ulps != 0 && !(two_references && got[i] == twice[i]);
  }
  // One element may differ at any size, so that a small tensor is not judged by a single rare fp32 difference.
  if (inexact > 1 + static_cast<int64_t>(inexact_fraction * static_cast<double>(got.size())))
    return ::testing::AssertionFailure() << what << ": " << inexact << " of " << got.size()
                                         << " elements differ from the rounded f32 result, more than "
                                         << 100 * inexact_fraction << "% (rounding not to nearest?)";
  return ::testing::AssertionSuccess();
}

void expect_gelu_matches_f32(DType dtype, Device device, int64_t n, Rng& rng) {
  const Tensor x = exact_in(dtype, {n}, rng, 0.0f, 3.0f), dout = exact_in(dtype, {n}, rng);
  const Tensor dx = exact_in(dtype, {n}, rng);

  const Tensor out = poisoned({n}, Device::cpu()), out16 = poisoned_narrow({n}, dtype, device);
  ops::gelu_forward(out, x);
  ops::gelu_forward(out16, narrow_on(x, dtype, device));
  EXPECT_TRUE(within_one_ulp("gelu out", out16, out, 1));

  const Tensor dx16 = narrow_on(dx, dtype, device);
  ops::gelu_backward(dx, x, dout);
  ops::gelu_backward(dx16, narrow_on(x, dtype, device), narrow_on(dout, dtype, device));
  EXPECT_TRUE(within_one_ulp("gelu dx", dx16, dx, 1));

  // Written over a NaN-filled dx (GradWrite::Overwrite), which is never read: the backward from zeros.
  const Tensor from_zeros = Tensor::zeros({n}, DType::F32), over16 = poisoned_narrow({n}, dtype, device);
  ops::gelu_backward(from_zeros, x, dout);
  ops::gelu_backward(over16, narrow_on(x, dtype, device), narrow_on(dout, dtype, device), ops::GradWrite::Overwrite);
  EXPECT_TRUE(within_one_ulp("gelu dx (written over)", over16, from_zeros, 1));
}

void expect_residual_matches_f32(DType dtype, Device device, int64_t n, Rng& rng) {
  // b much smaller than a, as a block's output against the residual stream: most of b's bits round away.
  const Tensor a = exact_in(dtype, {n}, rng), b = exact_in(dtype, {n}, rng, 0.0f, 0.01f);
  const Tensor dout = exact_in(dtype, {n}, rng), da = exact_in(dtype, {n}, rng), db = exact_in(dtype, {n}, rng);

  const Tensor out = poisoned({n}, Device::cpu()), out16 = poisoned_narrow({n}, dtype, device);
  ops::residual_forward(out, a, b);
  ops::residual_forward(out16, narrow_on(a, dtype, device), narrow_on(b, dtype, device));
  EXPECT_TRUE(within_one_ulp("residual out", out16, out, 1));

  const Tensor da16 = narrow_on(da, dtype, device), db16 = narrow_on(db, dtype, device);
  const Tensor dout16 = narrow_on(dout, dtype, device);
  ops::residual_backward(da, db, dout);
  ops::residual_backward(da16, db16, dout16);
  EXPECT_TRUE(within_one_ulp("residual da", da16, da, 1));
  EXPECT_TRUE(within_one_ulp("residual db", db16, db, 1));

  // The gradient of an input that starts at the add: dout's bits.
  const Tensor copy16 = poisoned_narrow({n}, dtype, device);
  ops::residual_gradient_copy(copy16, dout16);
  EXPECT_EQ(bits_of(copy16), bits_of(dout16));
}

void expect_layernorm_matches_f32(DType dtype, Device device, int64_t N, int64_t C, Rng& rng) {
  const Tensor x = exact_in(dtype, {N, C}, rng, 3.0f, 2.0f), dout = exact_in(dtype, {N, C}, rng);
  const Tensor dx = exact_in(dtype, {N, C}, rng);
  // Parameters and their gradients are f32 on both sides: values that are not exact in the 16-bit type.
  const Tensor w = exact_in(DType::F32, {C}, rng, 1.0f, 0.5f), b = exact_in(DType::F32, {C}, rng);
  const Tensor dw = exact_in(DType::F32, {C}, rng), db = exact_in(DType::F32, {C}, rng);
  const auto on_device = [&](const Tensor& t) { return t.to(device); };
  const auto fresh = [&](const Shape& shape) { return poisoned(shape, Device::cpu()); };

  const Tensor out = fresh({N, C}), mean = fresh({N}), rstd = fresh({N});
  const Tensor out16 = poisoned_narrow({N, C}, dtype, device), mean16 = on_device(fresh({N}));
  const Tensor rstd16 = on_device(fresh({N}));
  ops::layernorm_forward(out, mean, rstd, x, w, b);
  ops::layernorm_forward(out16, mean16, rstd16, narrow_on(x, dtype, device), on_device(w), on_device(b));
  EXPECT_TRUE(within_one_ulp("layernorm out", out16, out, C));
  EXPECT_TRUE(all_close("layernorm mean", mean16, mean, tolerance_for(DType::F32, C)));
  EXPECT_TRUE(all_close("layernorm rstd", rstd16, rstd, tolerance_for(DType::F32, C)));

  const Tensor dx16 = narrow_on(dx, dtype, device), dw16 = on_device(dw), db16 = on_device(db);
  ops::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd);
  ops::layernorm_backward(dx16, dw16, db16, narrow_on(dout, dtype, device), narrow_on(x, dtype, device), on_device(w),
                          mean16, rstd16);
  EXPECT_TRUE(within_one_ulp("layernorm dx", dx16, dx, C));
  EXPECT_TRUE(all_close("layernorm dw", dw16, dw, tolerance_for(DType::F32, N)));
  EXPECT_TRUE(all_close("layernorm db", db16, db, tolerance_for(DType::F32, N)));

  // dx written over a NaN-filled buffer (GradWrite::Overwrite), which is never read: the backward from zeros.
  const auto zeros = [](const Shape& shape) { return Tensor::zeros(shape, DType::F32); };
  const Tensor from_zeros = zeros({N, C}), over16 = poisoned_narrow({N, C}, dtype, device);
  const Tensor dw_zeros = zeros({C}), db_zeros = zeros({C});
  ops::layernorm_backward(from_zeros, dw_zeros, db_zeros, dout, x, w, mean, rstd);
  ops::layernorm_backward(over16, on_device(zeros({C})), on_device(zeros({C})), narrow_on(dout, dtype, device),
                          narrow_on(x, dtype, device), on_device(w), mean16, rstd16, ops::GradWrite::Overwrite);
  EXPECT_TRUE(within_one_ulp("layernorm dx (written over)", over16, from_zeros, C));
  // dw and db written over NaNs (dparams_write Overwrite: a training step's first contribution), never read: the sums
  // from zeros.
  const Tensor dw_over = poisoned({C}, device), db_over = poisoned({C}, device);
  ops::layernorm_backward(narrow_on(dx, dtype, device), dw_over, db_over, narrow_on(dout, dtype, device),
                          narrow_on(x, dtype, device), on_device(w), mean16, rstd16, ops::GradWrite::Add,
                          ops::GradWrite::Overwrite);
  EXPECT_TRUE(all_close("layernorm dw (written over)", dw_over, dw_zeros, tolerance_for(DType::F32, N)));
  EXPECT_TRUE(all_close("layernorm db (written over)", db_over, db_zeros, tolerance_for(DType::F32, N)));
}

void expect_linear_forward_matches_f32(DType dtype, Device device, int64_t N, int64_t C, int64_t OC, Rng& rng) {
  const Tensor x = exact_in(dtype, {N, C}, rng), w = exact_in(dtype, {OC, C}, rng, 0.0f, 0.1f);
  const Tensor b = exact_in(DType::F32, {OC}, rng);
  const Tensor x16 = narrow_on(x, dtype, device), w16 = narrow_on(w, dtype, device);
  for (const bool with_bias : {true, false}) {
    const Tensor bias = with_bias ? b : Tensor(), bias_on = with_bias ? b.to(device) : Tensor();
    const Tensor out = poisoned({N, OC}, Device::cpu());
    const Tensor out16 = poisoned_narrow({N, OC}, dtype, device), out32 = poisoned({N, OC}, device);
    ops::linear_forward(out, x, w, bias);
    ops::linear_forward(out16, x16, w16, bias_on);
    ops::linear_forward(out32, x16, w16, bias_on);
    EXPECT_TRUE(within_one_ulp(with_bias ? "linear out (bias)" : "linear out (no bias)", out16, out, C));
    EXPECT_TRUE(all_close(with_bias ? "linear f32 out (bias)" : "linear f32 out (no bias)", out32, out,
                          tolerance_for(DType::F32, C)));
  }
  // A 16-bit out with the bias in its own type (the model's 16-bit copy, linear.h): the sum starts from the bias
  // widened exactly, so the reference is the f32 layer with that bias.
  // The product may also be rounded before the bias joins it (the header): the second reference.
  const Tensor b16 = narrow_on(b, dtype, Device::cpu()), out = poisoned({N, OC}, Device::cpu());
  const Tensor out16 = poisoned_narrow({N, OC}, dtype, device), product = poisoned({N, OC}, Device::cpu());
  ops::linear_forward(out, x, w, b16.to_dtype(DType::F32));
  ops::linear_forward(product, x, w, Tensor());
  ops::linear_forward(out16, x16, w16, b16.to(device));
  std::vector<float> bias_rows(static_cast<size_t>(N * OC));
  const std::vector<float> bias = b16.to_floats();
  for (size_t i = 0; i < bias_rows.size(); ++i) bias_rows[i] = bias[i % bias.size()];
  EXPECT_TRUE(within_one_ulp("linear out (16-bit bias)", out16, out, C, 0.01,
                             {product, Tensor::from_floats(bias_rows, {N, OC})}));
}

void expect_linear_backward_matches_f32(DType dtype, Device device, int64_t N, int64_t C, int64_t OC, Rng& rng) {
  const Tensor x = exact_in(dtype, {N, C}, rng), w = exact_in(dtype, {OC, C}, rng, 0.0f, 0.1f);
  const Tensor dout = exact_in(dtype, {N, OC}, rng);
  // The gradients start from random values on both sides (the backward accumulates); dinp's are exact in 16 bits.
  const Tensor dx = exact_in(dtype, {N, C}, rng), dw = exact_in(DType::F32, {OC, C}, rng);
  const Tensor db = exact_in(DType::F32, {OC}, rng);
  const Tensor dx16 = narrow_on(dx, dtype, device), dw16 = dw.to(device), db16 = db.to(device);
  // dinp's product alone (from zeros), rounded before its starting values join it: the second reference (header).
  const Tensor product = Tensor::zeros({N, C}, DType::F32), dx_start = dx.clone();
  ops::linear_backward(product, Tensor(), Tensor(), dout, x, w);
  ops::linear_backward(dx, dw, db, dout, x, w);
  ops::linear_backward(dx16, dw16, db16, narrow_on(dout, dtype, device), narrow_on(x, dtype, device),
                       narrow_on(w, dtype, device));
  EXPECT_TRUE(within_one_ulp("linear dinp", dx16, dx, OC, 0.01, {product, dx_start}));
  EXPECT_TRUE(all_close("linear dweight", dw16, dw, tolerance_for(DType::F32, N)));
  EXPECT_TRUE(all_close("linear dbias", db16, db, tolerance_for(DType::F32, N)));
  // Written over (GradWrite::Overwrite): the product alone, rounded once; the NaNs dinp held are never read.
  const Tensor dx16_over = poisoned_narrow({N, C}, dtype, device);
  ops::linear_backward(dx16_over, Tensor(), Tensor(), narrow_on(dout, dtype, device), narrow_on(x, dtype, device),
                       narrow_on(w, dtype, device), ops::GradWrite::Overwrite);
  EXPECT_TRUE(within_one_ulp("linear dinp (written over)", dx16_over, product, OC));
  // The parameters' gradients written over NaNs (dparams_write Overwrite: a training step's first contribution), never
  // read: the products from zeros. With a 16-bit dout, CUDA's weight product writes dbias from its epilogue; with an
  // f32 dout (rounded for the products), the column sums store theirs.
  const Tensor dw_zeros = Tensor::zeros({OC, C}, DType::F32), db_zeros = Tensor::zeros({OC}, DType::F32);
  ops::linear_backward(Tensor(), dw_zeros, db_zeros, dout, x, w);
  for (const bool dout16 : {true, false}) {
    const char* how = dout16 ? " (written over, 16-bit dout)" : " (written over, f32 dout)";
    const Tensor dw_over = poisoned({OC, C}, device), db_over = poisoned({OC}, device);
    ops::linear_backward(Tensor(), dw_over, db_over, dout16 ? narrow_on(dout, dtype, device) : dout.to(device),
                         narrow_on(x, dtype, device), narrow_on(w, dtype, device), ops::GradWrite::Add,
                         ops::GradWrite::Overwrite);
    EXPECT_TRUE(
        all_close((std::string("linear dweight") + how).c_str(), dw_over, dw_zeros, tolerance_for(DType::F32, N)));
    EXPECT_TRUE(
        all_close((std::string("linear dbias") + how).c_str(), db_over, db_zeros, tolerance_for(DType::F32, N)));
  }
}

void expect_no_rows_give_zero_param_grads(DType dtype, Device device) {
  Rng rng(71);
  const int64_t C = 12, OC = 5;
  const Tensor inp = Tensor::empty({0, C}, dtype, device), dout = Tensor::empty({0, OC}, dtype, device);
  const Tensor dinp = Tensor::empty({0, C}, dtype, device);
  const Tensor weight = random_normal({OC, C}, rng).to_dtype(dtype).to(device);
  const Tensor w = random_normal({C}, rng).to(device), mean = Tensor::empty({0}, DType::F32, device);
  const Tensor rstd = Tensor::empty({0}, DType::F32, device);
  const Tensor zeros_oc = Tensor::zeros({OC}, DType::F32), zeros_c = Tensor::zeros({C}, DType::F32);
  for (const ops::GradWrite write : {ops::GradWrite::Overwrite, ops::GradWrite::Add}) {
    const bool over = write == ops::GradWrite::Overwrite;
    const Tensor start_w = random_normal({OC, C}, rng), start_b = random_normal({OC}, rng);
    const Tensor dweight = over ? poisoned({OC, C}, device) : start_w.to(device);
    const Tensor dbias = over ? poisoned({OC}, device) : start_b.to(device);
    ops::linear_backward(dinp, dweight, dbias, dout, inp, weight, ops::GradWrite::Overwrite, write);
    EXPECT_TRUE(all_close("linear dweight, no rows", dweight, over ? Tensor::zeros({OC, C}, DType::F32) : start_w, {}));
    EXPECT_TRUE(all_close("linear dbias, no rows", dbias, over ? zeros_oc : start_b, {}));

    const Tensor start_dw = random_normal({C}, rng), start_db = random_normal({C}, rng);
    const Tensor dw = over ? poisoned({C}, device) : start_dw.to(device);
    const Tensor db = over ? poisoned({C}, device) : start_db.to(device);
    ops::layernorm_backward(dinp, dw, db, dinp, inp, w, mean, rstd, ops::GradWrite::Overwrite, write);
    EXPECT_TRUE(all_close("layernorm dw, no rows", dw, over ? zeros_c : start_dw, {}));
    EXPECT_TRUE(all_close("layernorm db, no rows", db, over ? zeros_c : start_db, {}));

    // The embedding with no batch row: every row of dwpe a sum over nothing.
    const Tensor start_dwpe = random_normal({6, C}, rng);
    const Tensor dwpe = over ? poisoned({6, C}, device) : start_dwpe.to(device);
    ops::embedding_backward(Tensor::zeros({OC, C}, DType::F32, device), dwpe, Tensor::empty({0, 4, C}, dtype, device),
                            Tensor::empty({0, 4}, DType::I32, device), write);
    EXPECT_TRUE(all_close("embedding dwpe, no rows", dwpe, over ? Tensor::zeros({6, C}, DType::F32) : start_dwpe, {}));
  }
}

void expect_embedding_matches_f32(DType dtype, Device device, int64_t B, int64_t T, int64_t C, int64_t Vp,
                                  int64_t distinct, Rng& rng) {
  const Tensor tokens = random_ids({B, T}, rng, distinct);
  const int64_t maxT = T + 3;  // rows of wpe past the sequence, which neither side may read
  // The tables are f32 on both sides, with values that are not exact in the 16-bit type: out must be their f32 sum
  // rounded once (rounding wte to 16 bits before adding wpe moves about a quarter of the elements by one ulp).
  const Tensor wte = exact_in(DType::F32, {Vp, C}, rng), wpe = exact_in(DType::F32, {maxT, C}, rng);
  const Tensor out = poisoned({B, T, C}, Device::cpu()), out16 = poisoned_narrow({B, T, C}, dtype, device);
  ops::embedding_forward(out, tokens, wte, wpe);
  ops::embedding_forward(out16, tokens.to(device), wte.to(device), wpe.to(device));
  EXPECT_TRUE(within_one_ulp("embedding out", out16, out, 1));

  // dout is exact in the 16-bit type, so both sides add the same values; dwte and dwpe start from random values
  // on both sides (the backward accumulates).
  const Tensor dout = exact_in(dtype, {B, T, C}, rng);
  const Tensor dwte = exact_in(DType::F32, {Vp, C}, rng), dwpe = exact_in(DType::F32, {maxT, C}, rng);
  const Tensor dwte16 = dwte.to(device), dwpe16 = dwpe.to(device);
  ops::embedding_backward(dwte, dwpe, dout, tokens);
  ops::embedding_backward(dwte16, dwpe16, narrow_on(dout, dtype, device), tokens.to(device));
  // A row of dwte sums every position holding its token (up to B*T terms, in atomic order on CUDA), a row of dwpe
  // the B positions at its index.
  EXPECT_TRUE(all_close("embedding dwte", dwte16, dwte, tolerance_for(DType::F32, B * T)));
  EXPECT_TRUE(all_close("embedding dwpe", dwpe16, dwpe, tolerance_for(DType::F32, B)));

  // Written over (a training step's first contribution to wpe), from NaNs: the position sums alone, and zeros in
  // the rows past T.
  const Tensor dwpe_over = poisoned({maxT, C}, device), expected = Tensor::zeros({maxT, C}, DType::F32);
  ops::embedding_backward(Tensor::zeros({Vp, C}, DType::F32), expected, dout, tokens);
  ops::embedding_backward(dwte16, dwpe_over, narrow_on(dout, dtype, device), tokens.to(device),
                          ops::GradWrite::Overwrite);
  EXPECT_TRUE(all_close("embedding dwpe written over", dwpe_over, expected, tolerance_for(DType::F32, B)));
}

void expect_classifier_matches_f32(DType dtype, Device device, int64_t N, int64_t vocab, int64_t Vp, float offset,
                                   float dloss, Rng& rng, ops::ClassifierFn classifier) {
  // Random values in the padded columns too: the gradient must overwrite them with zeros (dloss != 0) or leave them.
  const Tensor logits = exact_in(dtype, {N, Vp}, rng, offset, 2.0f);
  const Tensor targets = random_ids({N}, rng, vocab);
  const Tensor grad = logits.clone(), grad16 = narrow_on(logits, dtype, device);
  const Tensor losses = poisoned({N}, Device::cpu()), losses16 = poisoned({N}, device);
  ops::fused_classifier(grad, losses, targets, vocab, dloss);
  classifier(grad16, losses16, targets.to(device), vocab, dloss);
  // Each loss is a log-sum-exp over the real vocabulary, in f32 on both sides (expf on CUDA, exp_fast on the CPU).
  EXPECT_TRUE(all_close("classifier losses", losses16, losses, tolerance_for(DType::F32, vocab)));
  if (dloss != 0.0f) {
    // Logits far from zero take few values (bf16's spacing at 100 is 0.5), so a row holds few distinct gradients, and
    // an fp32 difference that moves one of them across a rounding boundary moves all its copies (measured: 3.3% of
    // the elements at -O2, where exp_fast and expf differ in the last bit at one of those values): each element
    // within one ulp, with no count.
    const double inexact_fraction = offset != 0.0f ? 1.0 : 0.01;
    EXPECT_TRUE(within_one_ulp("classifier dlogits", grad16, grad, vocab, inexact_fraction));
  } else {
    EXPECT_EQ(bits_of(grad16), bits_of(narrow_on(logits, dtype, Device::cpu())))
        << "classifier: dloss = 0 must leave the logits as they were";
  }
}

void expect_mixed_dtypes_invalid(Device device) {
  const auto zeros = [&](const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype, device); };
  const DType bf16 = DType::BF16, f16 = DType::F16, f32 = DType::F32;
  const Shape rows{2, 8}, row{8}, stats{2};
  using testing::expect_error;
  constexpr ErrorKind kInvalid = ErrorKind::InvalidArgument;

  expect_error([&] { ops::gelu_forward(zeros(rows, bf16), zeros(rows, f32)); }, kInvalid,
               {"gelu_forward", "different dtypes", "f32", "bf16"});
  expect_error([&] { ops::gelu_backward(zeros(rows, f16), zeros(rows, bf16), zeros(rows, bf16)); }, kInvalid,
               {"gelu_backward", "different dtypes", "bf16", "f16"});
  expect_error([&] { ops::gelu_forward(zeros(rows, DType::I32), zeros(rows, DType::I32)); }, kInvalid, {"i32"});

  expect_error([&] { ops::residual_forward(zeros(rows, f32), zeros(rows, bf16), zeros(rows, bf16)); }, kInvalid,
               {"residual_forward", "different dtypes", "f32", "bf16"});
  expect_error([&] { ops::residual_backward(zeros(rows, bf16), zeros(rows, f16), zeros(rows, bf16)); }, kInvalid,
               {"residual_backward", "different dtypes", "f16"});

  const Tensor w = zeros(row, f32), b = zeros(row, f32), mean = zeros(stats, f32), rstd = zeros(stats, f32);
  const Tensor x = zeros(rows, bf16);
  expect_error([&] { ops::layernorm_forward(zeros(rows, f32), mean, rstd, x, w, b); }, kInvalid,
               {"layernorm_forward", "different dtypes", "bf16", "f32"});
  expect_error([&] { ops::layernorm_forward(zeros(rows, bf16), mean, rstd, x, zeros(row, bf16), b); }, kInvalid,
               {"layernorm_forward", "weight is bf16"});
  expect_error([&] { ops::layernorm_forward(zeros(rows, bf16), mean, rstd, x, w, zeros(row, f16)); }, kInvalid,
               {"layernorm_forward", "bias is f16"});
  expect_error([&] { ops::layernorm_forward(zeros(rows, bf16), zeros(stats, bf16), rstd, x, w, b); }, kInvalid,
               {"layernorm_forward", "mean is bf16"});
  expect_error([&] { ops::layernorm_backward(zeros(rows, bf16), w, b, zeros(rows, f16), x, w, mean, rstd); }, kInvalid,
               {"layernorm_backward", "different dtypes", "f16"});
  expect_error(
      [&] { ops::layernorm_backward(zeros(rows, bf16), zeros(row, bf16), b, zeros(rows, bf16), x, w, mean, rstd); },
      kInvalid, {"layernorm_backward", "dw is bf16"});
  expect_error(
      [&] { ops::layernorm_backward(zeros(rows, bf16), w, b, zeros(rows, bf16), x, w, mean, zeros(stats, f16)); },
      kInvalid, {"layernorm_backward", "rstd is f16"});

  const Tensor weight = zeros({4, 8}, bf16), bias = zeros({4}, f32);
  expect_error(
      [&] {
        ops::linear_forward(zeros({2, 4}, f16), x, weight, bias);
      },
      kInvalid, {"linear_forward", "out is f16", "f32 or bf16"});
  expect_error(
      [&] {
        ops::linear_forward(zeros({2, 4}, bf16), zeros(rows, f32), zeros({4, 8}, f32), bias);
      },
      kInvalid, {"linear_forward", "out is bf16", "f32 inputs"});
  // The bias: f32, or a 16-bit out's own type.
  expect_error(
      [&] {
        ops::linear_forward(zeros({2, 4}, f32), x, weight, zeros({4}, bf16));
      },
      kInvalid, {"linear bias", "expected dtype f32"});
  expect_error(
      [&] {
        ops::linear_forward(zeros({2, 4}, bf16), x, weight, zeros({4}, f16));
      },
      kInvalid, {"linear bias", "expected dtype bf16"});
  expect_error(
      [&] {
        ops::linear_forward(zeros({2, 4}, bf16), x, zeros({4, 8}, f16), bias);
      },
      kInvalid, {"linear_forward", "bf16", "f16"});

  // The embedding: 16-bit activations, f32 tables and gradients.
  const Tensor tokens = zeros({2, 3}, DType::I32), table = zeros({5, 8}, f32), out = zeros({2, 3, 8}, bf16);
  expect_error(
      [&] {
        ops::embedding_forward(zeros({2, 3, 8}, DType::I32), tokens, table, table);
      },
      kInvalid, {"embedding_forward", "out is i32", "f32, bf16 or f16"});
  expect_error(
      [&] {
        ops::embedding_forward(out, tokens, zeros({5, 8}, bf16), table);
      },
      kInvalid, {"embedding_forward", "wte is bf16", "f32"});
  expect_error(
      [&] {
        ops::embedding_forward(out, tokens, table, zeros({5, 8}, f16));
      },
      kInvalid, {"embedding_forward", "wpe is f16", "f32"});
  expect_error(
      [&] {
        ops::embedding_backward(table, table, zeros({2, 3, 8}, DType::I32), tokens);
      },
      kInvalid, {"embedding_backward", "dout is i32", "f32, bf16 or f16"});
  expect_error(
      [&] {
        ops::embedding_backward(zeros({5, 8}, bf16), table, out, tokens);
      },
      kInvalid, {"embedding_backward", "dwte is bf16", "f32"});
  expect_error(
      [&] {
        ops::embedding_backward(table, zeros({5, 8}, f16), out, tokens);
      },
      kInvalid, {"embedding_backward", "dwpe is f16", "f32"});
  expect_error([&] { ops::embedding_backward_rows(table, table, out, tokens, 0); }, kInvalid,
               {"embedding_backward_rows", "dout is bf16", "must be f32"});

  // The classifier: 16-bit logits, f32 losses, i32 targets.
  const Tensor losses = zeros({2}, f32), targets = zeros({2}, DType::I32);
  expect_error(
      [&] {
        ops::fused_classifier(zeros({2, 8}, DType::I32), losses, targets, 8, 1.0f);
      },
      kInvalid, {"fused_classifier", "logits is i32", "f32, bf16 or f16"});
  expect_error(
      [&] {
        ops::fused_classifier(zeros({2, 8}, bf16), zeros({2}, bf16), targets, 8, 1.0f);
      },
      kInvalid, {"fused_classifier", "losses is bf16", "f32"});
  expect_error(
      [&] {
        ops::fused_classifier(zeros({2, 8}, f16), losses, zeros({2}, f32), 8, 1.0f);
      },
      kInvalid, {"fused_classifier", "targets is f32", "i32"});
}

}  // namespace lab::test
