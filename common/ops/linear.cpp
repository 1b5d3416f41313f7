#include "common/ops/linear.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {
// Checks the shapes and dtypes shared by forward and backward; out_like's and bias's dtypes are the caller's to
// check.
void check_linear(const Tensor& inp, const Tensor& weight, const Tensor& out_like, const Tensor& bias, const char* op) {
  weight.check_ndim(2, "linear weight");
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(inp.ndim() >= 1 && inp.dim(-1) == C, InvalidArgument, op, ": input ", shape_str(inp.shape()),
            " does not match weight ", shape_str(weight.shape()), " ([out, in])");
  const int64_t N = inp.numel() / C;
  LAB_CHECK(out_like.dim(-1) == OC && out_like.numel() == N * OC, InvalidArgument, op, ": output ",
            shape_str(out_like.shape()), " should be [", N, ", ", OC, "]");
  if (bias.defined()) bias.check_shape({OC}, "linear bias");
  LAB_CHECK(inp.dtype() == weight.dtype() &&
                (inp.dtype() == DType::F32 || inp.dtype() == DType::BF16 || inp.dtype() == DType::F16),
            InvalidArgument, op, ": input ", dtype_name(inp.dtype()), " and weight ", dtype_name(weight.dtype()),
            " must both be f32, bf16 or f16");
}
}  // namespace

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  check_linear(inp, weight, out, bias, "linear_forward");
  LAB_CHECK(out.dtype() == DType::F32 || out.dtype() == inp.dtype(), InvalidArgument, "linear_forward: out is ",
            dtype_name(out.dtype()), "; with ", dtype_name(inp.dtype()), " inputs it must be f32 or ",
            dtype_name(inp.dtype()));
  // An f32 bias, or a 16-bit out's own type (linear.h).
  if (bias.defined() && bias.dtype() != DType::F32)
    bias.check_dtype(out.dtype(), "linear bias (f32, or a 16-bit out's dtype)");
  check_same_device({&out, &inp, &weight, &bias}, "linear_forward");
  LAB_DISPATCH(out.device(), linear_forward, out, inp, weight, bias);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, GradWrite dinp_write, GradWrite dparams_write) {
  check_linear(inp, weight, dout, dbias, "linear_backward");
  LAB_CHECK(dout.dtype() == DType::F32 || dout.dtype() == inp.dtype(), InvalidArgument, "linear_backward: dout is ",
            dtype_name(dout.dtype()), "; with ", dtype_name(inp.dtype()), " inputs it must be f32 or ",
            dtype_name(inp.dtype()));
  if (dinp.defined()) {
    dinp.check_dtype(dout.dtype(), "linear dinp (dout's dtype)");
    LAB_CHECK(dinp.numel() == inp.numel(), InvalidArgument, "linear_backward: dinp ", shape_str(dinp.shape()),
              " vs input ", shape_str(inp.shape()));
  }
  if (dbias.defined()) dbias.check_dtype(DType::F32, "linear dbias");
  if (dweight.defined()) {
    dweight.check_dtype(DType::F32, "linear dweight");
    dweight.check_shape(weight.shape(), "linear dweight");
  }
  check_same_device({&dinp, &dweight, &dbias, &dout, &inp, &weight}, "linear_backward");
  zero_when_no_rows(dout.numel() == 0, dparams_write, {&dweight, &dbias});
  LAB_DISPATCH(dout.device(), linear_backward, dinp, dweight, dbias, dout, inp, weight, dinp_write, dparams_write);
}

void linear_weight_grad_rows(const Tensor& dweight_rows, const Tensor& dout, const Tensor& inp, int64_t row_begin) {
  dweight_rows.check_ndim(2, "linear_weight_grad_rows dweight_rows");
  const int64_t R = dweight_rows.dim(0), C = dweight_rows.dim(1);
  LAB_CHECK(C > 0 && inp.ndim() >= 1 && inp.dim(-1) == C && dout.ndim() >= 1, InvalidArgument,
            "linear_weight_grad_rows: input ", shape_str(inp.shape()), " does not match rows ",
            shape_str(dweight_rows.shape()));
  const int64_t N = inp.numel() / C, OC = dout.dim(-1);
  LAB_CHECK(dout.numel() == N * OC, InvalidArgument, "linear_weight_grad_rows: dout ", shape_str(dout.shape()),
            " should have ", N, " rows");
  LAB_CHECK(row_begin >= 0 && row_begin + R <= OC, InvalidArgument, "linear_weight_grad_rows: rows [", row_begin, ", ",
            row_begin + R, ") of a weight with ", OC, " rows");
  for (const Tensor* t : {&dweight_rows, &dout, &inp}) t->check_dtype(DType::F32, "linear_weight_grad_rows");
  check_same_device({&dweight_rows, &dout, &inp}, "linear_weight_grad_rows");
  LAB_DISPATCH(dout.device(), linear_weight_grad_rows, dweight_rows, dout, inp, row_begin);
}

}  // namespace lab::ops
