#include "common/ops/batched_attention.h"

#include "common/ops/attention.h"
#include "common/ops/attention_shape.h"
#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {

// qkv [B,T,3C] with 3C = 3 * n_head * head_size, and probs [B,NH,T,T].
AttentionDims check_batched(const Tensor& qkv, const Tensor& probs, int n_head, const char* op) {
  const AttentionDims d = check_attention_qkv(qkv, n_head, "batched attention qkv", op);
  probs.check_shape({d.B, n_head, d.T, d.T}, "batched attention probabilities");
  return d;
}

}  // namespace

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head) {
  check_same_float_dtype({&qkv, &probs, &out}, "batched_attention_forward");
  const AttentionDims d = check_batched(qkv, probs, n_head, "batched_attention_forward");
  out.check_shape({d.B, d.T, d.C}, "batched attention out");
  check_same_device({&out, &probs, &qkv}, "batched_attention_forward");
  if (qkv.dtype() == DType::F32) return attention_forward(out, probs, qkv, n_head);
  LAB_DISPATCH(qkv.device(), batched_attention_forward, out, probs, qkv, n_head);
}

void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head, GradWrite dqkv_write) {
  check_same_float_dtype({&qkv, &probs, &dqkv, &dout}, "batched_attention_backward");
  const AttentionDims d = check_batched(qkv, probs, n_head, "batched_attention_backward");
  dqkv.check_shape(qkv.shape(), "batched attention dqkv");
  dout.check_shape({d.B, d.T, d.C}, "batched attention dout");
  check_same_device({&dqkv, &dout, &qkv, &probs}, "batched_attention_backward");
  if (qkv.dtype() == DType::F32) return attention_backward(dqkv, dout, qkv, probs, n_head, dqkv_write);
  LAB_DISPATCH(qkv.device(), batched_attention_backward, dqkv, dout, qkv, probs, n_head, dqkv_write);
}

}  // namespace lab::ops
