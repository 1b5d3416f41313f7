#include "common/nn/low_precision_linear.h"

#include "common/autograd/function_support.h"
#include "common/core/memory.h"
#include "common/ops/convert.h"
#include "common/ops/linear.h"

namespace lab {

Tensor matmul_operand(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  MemoryScope scope(MemCategory::Workspace);
  const Tensor low = Tensor::empty(x.shape(), dtype, x.device());
  ops::convert(low, x);
  return low;
}

Tensor bias_for_output(const Var& bias, const Tensor& bias_16bit, DType out_dtype) {
  if (!bias.defined()) return Tensor();
  return bias_16bit.defined() && bias_16bit.dtype() == out_dtype ? bias_16bit : bias.value();
}

Var low_precision_linear(Tape& tape, const Var& x, const Var& weight, const Tensor& weight_16bit, const Var& bias,
                         const Tensor& bias_16bit) {
  LAB_CHECK(weight_16bit.shape() == weight.value().shape(), InvalidArgument, "low_precision_linear: the 16-bit weight ",
            shape_str(weight_16bit.shape()), " is not the weight's shape ", shape_str(weight.value().shape()));
  Shape shape = x.value().shape();
  shape.back() = weight_16bit.dim(0);
  const bool requires_grad =
      tape.recording() && (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  Tensor out_value;
  {
    MemoryScope scope(MemCategory::Activations);
    out_value = Tensor::empty(shape, x.value().dtype(), x.value().device());  // f32, or the 16-bit activations'
  }
  Var out(out_value, requires_grad);
  // A 16-bit out adds the bias's 16-bit copy when there is one (see the header).
  ops::linear_forward(out.value(), matmul_operand(x.value(), weight_16bit.dtype()), weight_16bit,
                      bias_for_output(bias, bias_16bit, out_value.dtype()));
  if (out.requires_grad())
    tape.record("linear", {x.value()},
                [x, weight, weight_16bit, bias, out = out.without_value()] {
                  const ag::GradientTarget dx = ag::gradient_target(x);
                  const ag::ParameterGradients dp = ag::parameter_gradients(weight, bias);
                  ops::linear_backward(dx.grad, dp.weight, dp.bias, out.grad(),
                                       matmul_operand(x.value(), weight_16bit.dtype()), weight_16bit, dx.write,
                                       dp.write);
                },
                {x, weight, bias});
  return out;
}

}  // namespace lab
