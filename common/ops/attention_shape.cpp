#include "common/ops/attention_shape.h"

#include <cmath>

#include "common/core/error.h"

namespace lab::ops {

AttentionDims attention_dims(const Tensor& qkv, int n_head) {
  const int64_t C = qkv.dim(2) / 3;
  return {qkv.dim(0), qkv.dim(1), C, n_head, C / n_head, 1.0f / std::sqrt(static_cast<float>(C / n_head))};
}

AttentionDims check_attention_qkv(const Tensor& qkv, int n_head, const char* what, const char* op) {
  qkv.check_ndim(3, what);
  const int64_t C3 = qkv.dim(2);
  LAB_CHECK(C3 % 3 == 0 && n_head > 0 && (C3 / 3) % n_head == 0, InvalidArgument, op, ": qkv width ", C3,
            " is not 3 * n_head(", n_head, ") * head_size");
  return attention_dims(qkv, n_head);
}

}  // namespace lab::ops
