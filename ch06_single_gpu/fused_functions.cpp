#include "ch06_single_gpu/fused_functions.h"

#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/autograd/function_support.h"
#include "common/core/memory.h"
#include "common/nn/low_precision_linear.h"
#include "common/ops/gelu.h"
#include "common/ops/linear.h"

namespace lab::ch06 {

using ag::any_requires_grad;
using ag::new_activation;

Var fused_mlp(Tape& tape, const MLP& mlp, const Var& x, const ModelOptions& options) {
  const MemoryOpScope op("fused_mlp");
  const Linear& fc = mlp.c_fc;
  const Linear& proj = mlp.c_proj;
  // The products read 16-bit operands under mixed precision (the weights' 16-bit copies), fp32 ones otherwise.
  const Tensor w_fc = fc.matmul_weight(), w_proj = proj.matmul_weight();
  const DType operands = w_fc.dtype();
  const Tensor& xv = x.value();
  const int64_t C = xv.dim(-1), rows = xv.numel() / C, hidden_width = w_fc.dim(0);
  Shape hidden_shape = xv.shape();
  hidden_shape.back() = hidden_width;
  const bool with_grad = tape.recording() && any_requires_grad({&x, &fc.weight, &fc.bias, &proj.weight, &proj.bias});
  // hidden, GELU's input and the output have x's dtype: f32, or the 16-bit activations' (ModelOptions::activations).
  const Tensor hidden = new_activation(hidden_shape, xv);
  const Tensor pre_gelu = with_grad ? new_activation(hidden_shape, xv) : Tensor();
  matmul_bias_gelu(hidden, pre_gelu, matmul_operand(xv, operands), w_fc,
                   bias_for_output(fc.bias, fc.bias_16bit, hidden.dtype()));
  Var out(new_activation(xv.shape(), xv), with_grad);
  ops::linear_forward(out.value(), matmul_operand(hidden, operands), w_proj,
                      bias_for_output(proj.bias, proj.bias_16bit, xv.dtype()));
  if (!with_grad) return out;
  const Var w_fc_var = fc.weight, b_fc = fc.bias, w_proj_var = proj.weight, b_proj = proj.bias;
  // Selective recompute keeps GELU's input only; backward computes hidden = gelu(pre_gelu) again.
  const bool recompute = options.recompute_gelu;
  const Tensor kept_hidden = recompute ? Tensor() : hidden;
  tape.record(recompute ? "fused_mlp (gelu recomputed)" : "fused_mlp",
              recompute ? std::vector<Tensor>{xv, pre_gelu} : std::vector<Tensor>{xv, hidden, pre_gelu},
              [=, out = out.without_value()] {
                const Tensor& dout = out.grad();
                Tensor hidden_again = kept_hidden;
                if (!hidden_again.defined()) {
                  hidden_again = new_activation(pre_gelu.shape(), pre_gelu);
                  ops::gelu_forward(hidden_again, pre_gelu);
                }
                // c_proj's weight and bias gradients; its input's gradient is never stored (next).
                const ag::ParameterGradients dproj = ag::parameter_gradients(w_proj_var, b_proj);
                ops::linear_backward(Tensor(), dproj.weight, dproj.bias, dout, matmul_operand(hidden_again, operands),
                                     w_proj, ops::GradWrite::Add, dproj.write);
                hidden_again = Tensor();  // read by that product only
                // GELU's input gradient in one GEMM: (dout @ c_proj's weight) * gelu'(pre_gelu), written once.
                Tensor dpre;
                {
                  MemoryScope scope(MemCategory::Workspace);
                  dpre = Tensor::empty({rows, hidden_width}, pre_gelu.dtype(), pre_gelu.device());
                }
                matmul_epilogue(dpre, pre_gelu.reshape({rows, hidden_width}),
                                matmul_operand(dout, operands).reshape({rows, C}), w_proj, /*b_transposed=*/false,
                                Tensor(), Epilogue::GeluGrad);
                const ag::GradientTarget dx = ag::gradient_target(x);
                const ag::ParameterGradients dfc = ag::parameter_gradients(w_fc_var, b_fc);
                ops::linear_backward(dx.grad, dfc.weight, dfc.bias, dpre, matmul_operand(xv, operands), w_fc, dx.write,
                                     dfc.write);
              },
              {x, w_fc_var, b_fc, w_proj_var, b_proj});
  return out;
}

ResidualNorm residual_layernorm(Tape& tape, const Var& a, const Var& b, const LayerNorm& ln) {
  const MemoryOpScope op("residual_layernorm");
  const Tensor& av = a.value();
  const int64_t rows = av.numel() / av.dim(-1);
  const bool with_grad = tape.recording() && any_requires_grad({&a, &b, &ln.weight, &ln.bias});
  ResidualNorm out{Var(new_activation(av.shape(), av), with_grad), Var(new_activation(av.shape(), av), with_grad)};
  // The statistics are f32 whatever the activations are (common/ops/layernorm.h).
  const Tensor mean = ag::empty_as({rows}, DType::F32, av.device(), MemCategory::Activations);
  const Tensor rstd = ag::empty_as({rows}, DType::F32, av.device(), MemCategory::Activations);
  fused_residual_layernorm_forward(out.residual.value(), out.normalized.value(), mean, rstd, av, b.value(),
                                   ln.weight.value(), ln.bias.value());
  if (!with_grad) return out;
  // The residual's value is the LayerNorm's input, read by the backward; the inputs' and the normalized output's
  // gradients only.
  const Var residual = out.residual, normalized = out.normalized.without_value();
  const Var w = ln.weight, bias = ln.bias;
  // f32: chapter 6's lab kernel, which adds into a's and b's gradients. 16-bit: the sum's gradient is the residual
  // add's output gradient, which goes to a and b unchanged (ag::pass_gradient_through, as ag::residual_into_stream
  // does): both take its buffer, b (the attention branch, read by nothing else) before a's other reader, ln_1, adds
  // into it in its own backward. Nothing is zero-filled or copied.
  const bool through = av.dtype() != DType::F32;
  tape.record(
      "residual+layernorm", {residual.value(), mean, rstd},
      [a = a.without_value(), b = b.without_value(), residual, normalized, w, bias, mean, rstd, through] {
        const ag::ParameterGradients dp = ag::parameter_gradients(w, bias);
        if (!through) {
          fused_residual_layernorm_backward(a.grad_or_none(), b.grad_or_none(), dp.weight, dp.bias, residual.grad(),
                                            normalized.grad(), residual.value(), w.value(), mean, rstd, dp.write);
          return;
        }
        const ag::GradientTarget dsum = ag::gradient_target(residual);
        const ag::GradientPassThrough plan =
            ag::pass_gradient_through(dsum.grad, a, b, ag::BranchGradient::SharesStream);
        fused_residual_layernorm_backward_through(dsum.grad, dsum.write, plan.copy, dp.weight, dp.bias,
                                                  normalized.grad(), residual.value(), w.value(), mean, rstd, dp.write);
        plan.add_remaining(dsum.grad);
      },
      {a, b, w, bias});
  return out;
}

}  // namespace lab::ch06
