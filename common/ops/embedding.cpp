#include "common/ops/embedding.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  tokens.check_dtype(DType::I32, "embedding tokens");
  tokens.check_ndim(2, "embedding tokens");
  wte.check_ndim(2, "embedding wte");
  wpe.check_ndim(2, "embedding wpe");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(1);
  LAB_CHECK(wpe.dim(1) == C, InvalidArgument, "embedding: wte has ", C, " channels, wpe ", wpe.dim(1));
  LAB_CHECK(T <= wpe.dim(0), InvalidArgument, "embedding: sequence length ", T, " exceeds the ", wpe.dim(0),
            " positions of wpe");
  out.check_shape({B, T, C}, "embedding out");
  for (const Tensor* t : {&out, &wte, &wpe}) t->check_dtype(DType::F32, "embedding");
  check_same_device({&out, &tokens, &wte, &wpe}, "embedding_forward");
  LAB_DISPATCH(out.device(), embedding_forward, out, tokens, wte, wpe);
}

void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  tokens.check_dtype(DType::I32, "embedding tokens");
  tokens.check_ndim(2, "embedding tokens");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dwte.dim(1);
  dout.check_shape({B, T, C}, "embedding dout");
  LAB_CHECK(dwpe.dim(1) == C && T <= dwpe.dim(0), InvalidArgument, "embedding_backward: dwpe shape ",
            shape_str(dwpe.shape()));
  for (const Tensor* t : {&dout, &dwte, &dwpe}) t->check_dtype(DType::F32, "embedding_backward");
  check_same_device({&dwte, &dwpe, &dout, &tokens}, "embedding_backward");
  LAB_DISPATCH(dout.device(), embedding_backward, dwte, dwpe, dout, tokens);
}

}  // namespace lab::ops
