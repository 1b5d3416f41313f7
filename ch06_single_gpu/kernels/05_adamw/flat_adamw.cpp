// Checks of ch06_single_gpu/flat_adamw.h (once, for both backends), then dispatch by device.
#include "ch06_single_gpu/flat_adamw.h"

#include "common/ops/dispatch.h"

namespace lab::ch06 {

namespace {

// Equal element counts; m and v f32; a step >= 1; sorted, disjoint decay ranges inside the buffers.
void check_common(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                  const ops::AdamWHyper& hyper, const std::vector<ElementRange>& decay, const char* op) {
  const int64_t n = params.numel();
  for (const Tensor* t : {&grads, &m, &v}) {
    t->check_defined(op);
    LAB_CHECK(t->numel() == n, InvalidArgument, op, ": buffers of different sizes (", t->numel(), " vs ", n, ")");
  }
  m.check_dtype(DType::F32, op);
  v.check_dtype(DType::F32, op);
  LAB_CHECK(hyper.step >= 1, InvalidArgument, op, ": step must be >= 1, got ", hyper.step);
  int64_t previous_end = 0;
  for (const ElementRange& r : decay) {
    LAB_CHECK(previous_end <= r.begin && r.begin <= r.end && r.end <= n, InvalidArgument, op, ": decay range [",
              r.begin, ", ", r.end, ") is not sorted, disjoint and inside [0, ", n, ")");
    previous_end = r.end;
  }
}

}  // namespace

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay) {
  const char* op = "flat_adamw";
  params.check_defined(op);
  check_common(params, grads, m, v, hyper, decay, op);
  params.check_dtype(DType::F32, op);
  grads.check_dtype(DType::F32, op);
  ops::check_same_device({&params, &grads, &m, &v}, op);
  LAB_DISPATCH(params.device(), flat_adamw, params, grads, m, v, hyper, grad_scale, decay);
}

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay,
                     Bf16Rounding rounding) {
  const char* op = "flat_adamw_bf16";
  params.check_defined(op);
  check_common(params, grads, m, v, hyper, decay, op);
  params.check_dtype(DType::BF16, op);
  if (master.defined()) {
    master.check_dtype(DType::F32, op);
    LAB_CHECK(master.numel() == params.numel(), InvalidArgument, op, ": ", master.numel(), " master weights for ",
              params.numel(), " parameters");
  }
  LAB_CHECK(grads.dtype() == DType::F32 || grads.dtype() == DType::BF16, InvalidArgument, op,
            ": gradients must be f32 or bf16, got ", dtype_name(grads.dtype()));
  ops::check_same_device({&params, &master, &grads, &m, &v}, op);
  LAB_DISPATCH(params.device(), flat_adamw_bf16, params, master, grads, m, v, hyper, grad_scale, decay, rounding);
}

}  // namespace lab::ch06
