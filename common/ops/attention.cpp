#include "common/ops/attention.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {
void check_attention(const Tensor& qkv, const Tensor& att, int n_head, const char* op) {
  qkv.check_ndim(3, "attention qkv");
  qkv.check_dtype(DType::F32, op);
  att.check_dtype(DType::F32, op);
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C3 = qkv.dim(2);
  LAB_CHECK(C3 % 3 == 0 && n_head > 0 && (C3 / 3) % n_head == 0, InvalidArgument, op, ": qkv width ", C3,
            " is not 3 * n_head(", n_head, ") * head_size");
  att.check_shape({B, n_head, T, T}, "attention probabilities");
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head) {
  check_attention(qkv, att, n_head, "attention_forward");
  out.check_shape({qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3}, "attention out");
  out.check_dtype(DType::F32, "attention out");
  check_same_device({&out, &att, &qkv}, "attention_forward");
  LAB_DISPATCH(qkv.device(), attention_forward, out, att, qkv, n_head);
}

void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head) {
  check_attention(qkv, att, n_head, "attention_backward");
  dqkv.check_shape(qkv.shape(), "attention dqkv");
  dout.check_shape({qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3}, "attention dout");
  check_same_device({&dqkv, &dout, &qkv, &att}, "attention_backward");
  LAB_DISPATCH(qkv.device(), attention_backward, dqkv, dout, qkv, att, n_head);
}

}  // namespace lab::ops
