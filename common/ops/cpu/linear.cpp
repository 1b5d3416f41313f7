// CPU reference of common/ops/linear.h: three sgemm calls and a bias reduction.
//
// Forward writes the bias into `out` first and lets the GEMM accumulate onto it (beta = 1), which saves a
// separate pass over the output. The bias gradient is a column sum, split by column slices so that each
// thread sums its columns over all rows in a fixed order (deterministic).
//
// 16-bit inputs are widened to fp32 temporaries (exact: every bf16 and fp16 value is a float) and multiplied by
// the fp32 GEMM: the same products, with fp32 accumulation, as a GPU's 16-bit GEMM. A 16-bit out is computed into an
// fp32 temporary, bias and all, then rounded into out. Backward rounds an f32 dout to the 16-bit type first
// (linear.h); a 16-bit dinp is widened into an fp32 temporary that the GEMM adds onto (or, written over, the GEMM
// writes a new one), then rounded back.
// The temporaries are workspace, freed at the end of the call.
#include "common/ops/linear.h"

#include <algorithm>

#include "common/core/memory.h"
#include "common/ops/convert.h"
#include "common/ops/cpu/column_sums.h"
#include "common/ops/cpu/gemm.h"

namespace lab::ops::cpu {

namespace {

// An f32 copy of a 16-bit tensor; an f32 tensor itself.
Tensor widened(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  MemoryScope scope(MemCategory::Workspace);
  const Tensor wide = Tensor::empty(t.shape(), DType::F32);
  convert(wide, t);
  return wide;
}

// `t` (f32) as a product with `dtype` inputs reads it: each element rounded to dtype and widened back, in one
// pass into one f32 temporary; t itself for f32.
Tensor rounded_to(const Tensor& t, DType dtype) {
  if (dtype == DType::F32) return t;
  MemoryScope scope(MemCategory::Workspace);
  const Tensor rounded = Tensor::empty(t.shape(), DType::F32);
  const float* src = t.data<float>();
  float* dst = rounded.data<float>();
  const int64_t n = t.numel();
  if (dtype == DType::BF16) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(float_to_bf16_bits(src[i]));
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_bits_to_float(float_to_f16_bits(src[i]));
  }
  return rounded;
}

}  // namespace

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  if (out.dtype() != DType::F32) {
    MemoryScope scope(MemCategory::Workspace);
    const Tensor sum = Tensor::empty(out.shape(), DType::F32);
    linear_forward(sum, inp, weight, bias);
    convert(out, sum);
    return;
  }
  const int64_t OC = weight.dim(0), C = weight.dim(1), N = inp.numel() / C;
  const Tensor x = widened(inp), w = widened(weight);
  float* o = out.data<float>();
  if (bias.defined()) {
    const Tensor wide_bias = widened(bias);  // a 16-bit out's 16-bit bias, exactly
    const float* b = wide_bias.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) std::copy(b, b + OC, o + n * OC);
  }
  GemmRecorder::note({false, true, N, OC, C, bias.defined()});
  sgemm(false, true, N, OC, C, 1.0f, x.data<float>(), C, w.data<float>(), C, bias.defined() ? 1.0f : 0.0f, o, OC);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, GradWrite dinp_write, GradWrite dparams_write) {
  const int64_t OC = weight.dim(0), C = weight.dim(1), N = inp.numel() / C;
  // dout as the products read it: a 16-bit dout widened, an f32 one rounded to the inputs' type.
  const Tensor product_dout = dout.dtype() == DType::F32 ? rounded_to(dout, inp.dtype()) : widened(dout);
  const float* pd = product_dout.data<float>();
  if (dinp.defined()) {  // dinp[N,C] += dout[N,OC] @ weight[OC,C], or = with Overwrite
    const bool add = dinp_write == GradWrite::Add;
    // The fp32 sum: dinp itself when f32, else dinp widened (Add) or a new buffer (Overwrite: dinp is not read).
    const Tensor sum = dinp.dtype() == DType::F32 ? dinp
                       : add                      ? widened(dinp)
                                                  : Tensor::empty(dinp.shape(), DType::F32, dinp.device());
    GemmRecorder::note({false, false, N, C, OC, add});
    sgemm(false, false, N, C, OC, 1.0f, pd, OC, widened(weight).data<float>(), C, add ? 1.0f : 0.0f, sum.data<float>(),
          C);
    if (dinp.dtype() != DType::F32) convert(dinp, sum);
  }
  const bool add_params = dparams_write == GradWrite::Add;
  if (dweight.defined()) {  // dweight[OC,C] += dout^T[OC,N] @ inp[N,C], or = with Overwrite
    GemmRecorder::note({true, false, OC, C, N, add_params});
    sgemm(true, false, OC, C, N, 1.0f, pd, OC, widened(inp).data<float>(), C, add_params ? 1.0f : 0.0f,
          dweight.data<float>(), C);
  }
  if (dbias.defined())
    add_column_sums(dbias.data<float>(), (dout.dtype() == DType::F32 ? dout : product_dout).data<float>(), N, OC,
                    add_params);
}

void linear_weight_grad_rows(const Tensor& dweight_rows, const Tensor& dout, const Tensor& inp, int64_t row_begin) {
  const int64_t R = dweight_rows.dim(0), C = dweight_rows.dim(1), N = inp.numel() / C, OC = dout.dim(-1);
  // dweight_rows[R,C] += dout[:, rows]^T @ inp[N,C]: the rows are columns of dout, a leading dimension of OC.
  GemmRecorder::note({true, false, R, C, N, true});
  sgemm(true, false, R, C, N, 1.0f, dout.data<float>() + row_begin, OC, inp.data<float>(), C, 1.0f,
        dweight_rows.data<float>(), C);
}

}  // namespace lab::ops::cpu
