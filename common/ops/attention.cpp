#include "common/ops/attention.h"

#include "common/ops/attention_shape.h"
#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {
AttentionDims check_attention(const Tensor& qkv, const Tensor& att, int n_head, const char* op) {
  const AttentionDims d = check_attention_qkv(qkv, n_head, "attention qkv", op);
  qkv.check_dtype(DType::F32, op);
  att.check_dtype(DType::F32, op);
  att.check_shape({d.B, n_head, d.T, d.T}, "attention probabilities");
  return d;
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head) {
  const AttentionDims d = check_attention(qkv, att, n_head, "attention_forward");
  out.check_shape({d.B, d.T, d.C}, "attention out");
  out.check_dtype(DType::F32, "attention out");
  check_same_device({&out, &att, &qkv}, "attention_forward");
  LAB_DISPATCH(qkv.device(), attention_forward, out, att, qkv, n_head);
}

void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head,
                        GradWrite dqkv_write) {
  const AttentionDims d = check_attention(qkv, att, n_head, "attention_backward");
  dqkv.check_shape(qkv.shape(), "attention dqkv");
  dout.check_shape({d.B, d.T, d.C}, "attention dout");
  check_same_device({&dqkv, &dout, &qkv, &att}, "attention_backward");
  LAB_DISPATCH(qkv.device(), attention_backward, dqkv, dout, qkv, att, n_head, dqkv_write);
}

}  // namespace lab::ops
