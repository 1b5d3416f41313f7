#include "common/ops/batched_attention.h"

#include "common/ops/attention.h"
#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {

// qkv [B,T,3C] with 3C = 3 * n_head * head_size, and probs [B,NH,T,T].
void check_batched(const Tensor& qkv, const Tensor& probs, int n_head, const char* op) {
  qkv.check_ndim(3, "batched attention qkv");
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C3 = qkv.dim(2);
  LAB_CHECK(C3 % 3 == 0 && n_head > 0 && (C3 / 3) % n_head == 0, InvalidArgument, op, ": qkv width ", C3,
            " is not 3 * n_head(", n_head, ") * head_size");
  probs.check_shape({B, n_head, T, T}, "batched attention probabilities");
}

}  // namespace

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head) {
  check_same_float_dtype({&qkv, &probs, &out}, "batched_attention_forward");
  check_batched(qkv, probs, n_head, "batched_attention_forward");
  out.check_shape({qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3}, "batched attention out");
  check_same_device({&out, &probs, &qkv}, "batched_attention_forward");
  if (qkv.dtype() == DType::F32) return attention_forward(out, probs, qkv, n_head);
  LAB_DISPATCH(qkv.device(), batched_attention_forward, out, probs, qkv, n_head);
}

void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head) {
  check_same_float_dtype({&qkv, &probs, &dqkv, &dout}, "batched_attention_backward");
  check_batched(qkv, probs, n_head, "batched_attention_backward");
  dqkv.check_shape(qkv.shape(), "batched attention dqkv");
  dout.check_shape({qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3}, "batched attention dout");
  check_same_device({&dqkv, &dout, &qkv, &probs}, "batched_attention_backward");
  if (qkv.dtype() == DType::F32) return attention_backward(dqkv, dout, qkv, probs, n_head);
  LAB_DISPATCH(qkv.device(), batched_attention_backward, dqkv, dout, qkv, probs, n_head);
}

}  // namespace lab::ops
