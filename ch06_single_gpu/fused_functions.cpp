#include "ch06_single_gpu/fused_functions.h"

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/autograd/function_support.h"
#include "common/ops/gelu.h"
#include "common/ops/linear.h"

namespace lab::ch06 {

using ag::any_requires_grad;
using ag::new_activation;

Var fused_mlp(Tape& tape, const MLP& mlp, const Var& x) {
  // Mixed precision (16-bit matmul operands): the MLP's products are the mixed-precision linears, as in the
  // reference model; the epilogue-fused GEMM here takes fp32 operands.
  if (mlp.c_fc.weight_16bit.defined()) return mlp_forward(tape, mlp, x, ModelOptions{});
  const Var& w = mlp.c_fc.weight;
  const Var& b = mlp.c_fc.bias;
  Shape shape = x.value().shape();
  shape.back() = w.value().dim(0);
  const bool with_grad = tape.recording() && any_requires_grad({&x, &w, &b});
  Var hidden(new_activation(shape, x.value()), with_grad);
  const Tensor pre_gelu = with_grad ? new_activation(shape, x.value()) : Tensor();
  matmul_bias_gelu(hidden.value(), pre_gelu, x.value(), w.value(), b.defined() ? b.value() : Tensor());
  if (with_grad)
    tape.record(
        [=] {
          Tensor dpre;
          {
            MemoryScope scope(MemCategory::Workspace);
            dpre = Tensor::zeros(pre_gelu.shape(), pre_gelu.dtype(), pre_gelu.device());
          }
          ops::gelu_backward(dpre, pre_gelu, hidden.grad());
          ops::linear_backward(x.grad_or_none(), w.grad_or_none(), b.defined() ? b.grad_or_none() : Tensor(), dpre,
                               x.value(), w.value());
        },
        {x, w, b});
  return mlp.c_proj.forward(tape, hidden);
}

ResidualNorm residual_layernorm(Tape& tape, const Var& a, const Var& b, const LayerNorm& ln) {
  const Tensor& av = a.value();
  if (av.dtype() != DType::F32) {  // 16-bit activations: the reference ops, which take them
    const Var h = ag::residual(tape, a, b);
    return {h, ln.forward(tape, h)};
  }
  const int64_t rows = av.numel() / av.dim(-1);
  const bool with_grad = tape.recording() && any_requires_grad({&a, &b, &ln.weight, &ln.bias});
  ResidualNorm out{Var(new_activation(av.shape(), av), with_grad), Var(new_activation(av.shape(), av), with_grad)};
  const Tensor mean = new_activation({rows}, av);
  const Tensor rstd = new_activation({rows}, av);
  fused_residual_layernorm_forward(out.residual.value(), out.normalized.value(), mean, rstd, av, b.value(),
                                   ln.weight.value(), ln.bias.value());
  if (with_grad) {
    const Var residual = out.residual, normalized = out.normalized;
    const Var w = ln.weight, bias = ln.bias;
    tape.record(
        [=] {
          fused_residual_layernorm_backward(a.grad_or_none(), b.grad_or_none(), w.grad_or_none(), bias.grad_or_none(),
                                            residual.grad(), normalized.grad(), residual.value(), w.value(), mean,
                                            rstd);
        },
        {a, b, w, bias});
  }
  return out;
}

Tensor fused_cross_entropy(Tape& tape, const Var& logits, const Tensor& targets, int64_t vocab,
                           const ops::GradScale& grad_scale) {
  return ag::cross_entropy_through(fused_classifier, tape, logits, targets, vocab, grad_scale);
}

}  // namespace lab::ch06
