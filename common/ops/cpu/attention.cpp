// CPU reference of common/ops/attention.h.
//
// Each (batch, head) pair is independent, so the loop over pairs is the parallel loop (cpu/materialised_attention.h,
// shared with cpu/batched_attention.cpp); inside it the two products of attention are small GEMMs over strided views
// of qkv (q, k, v are column blocks of width HS inside rows of width 3C), issued single-threaded because we are
// already inside the parallel region.
#include "common/ops/attention.h"

#include "common/ops/attention_shape.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/cpu/materialised_attention.h"

namespace lab::ops::cpu {

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head) {
  const AttentionDims d = attention_dims(qkv, n_head);
  const float* base = qkv.data<float>();
  float* att_base = att.data<float>();
  float* out_base = out.data<float>();
  const int64_t ld = 3 * d.C;
  parallel_over_heads(d, /*scratch_floats=*/0, [&](const HeadOffsets& at, float*) {
    const float* q = base + at.qkv;
    const float* k = q + d.C;
    const float* v = q + 2 * d.C;
    float* a = att_base + at.probs;
    // a[t, s] = scale * q_t . k_s  (the upper triangle is computed and then discarded; at these sizes a
    // full GEMM is faster than a triangular loop)
    sgemm(false, true, d.T, d.T, d.HS, d.scale, q, ld, k, ld, 0.0f, a, d.T);
    for (int64_t t = 0; t < d.T; ++t) {
      float* row = a + t * d.T;
      const float inv = 1.0f / exponentiate_causal_row(row, t);
      for (int64_t s = 0; s <= t; ++s) row[s] *= inv;
      for (int64_t s = t + 1; s < d.T; ++s) row[s] = 0.0f;
    }
    // out[t, h-block] = sum_s a[t, s] v_s
    sgemm(false, false, d.T, d.HS, d.T, 1.0f, a, d.T, v, ld, 0.0f, out_base + at.out, d.C);
  });
}

void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head,
                        GradWrite dqkv_write) {
  const AttentionDims d = attention_dims(qkv, n_head);
  const float beta = dqkv_write == GradWrite::Add ? 1.0f : 0.0f;  // 0: dq, dk, dv written, not read
  const float* base = qkv.data<float>();
  const float* att_base = att.data<float>();
  const float* dout_base = dout.data<float>();
  float* dbase = dqkv.data<float>();
  const int64_t ld = 3 * d.C;
  parallel_over_heads(d, d.T * d.T, [&](const HeadOffsets& at, float* da) {
    const float* q = base + at.qkv;
    const float* k = q + d.C;
    const float* v = q + 2 * d.C;
    float* dq = dbase + at.qkv;
    float* dk = dq + d.C;
    float* dv = dq + 2 * d.C;
    const float* a = att_base + at.probs;
    const float* dO = dout_base + at.out;
    // Through out = a @ v:  da = dO @ v^T,  dv += a^T @ dO
    sgemm(false, true, d.T, d.T, d.HS, 1.0f, dO, d.C, v, ld, 0.0f, da, d.T);
    sgemm(true, false, d.T, d.HS, d.T, 1.0f, a, d.T, dO, d.C, beta, dv, ld);
    // Through the softmax: ds = a * (da - sum_s a*da), then the 1/sqrt(HS) scale; zero above the diagonal.
    for (int64_t t = 0; t < d.T; ++t) {
      const float* arow = a + t * d.T;
      float* drow = da + t * d.T;
      float dot = 0.0f;
      for (int64_t s = 0; s <= t; ++s) dot += arow[s] * drow[s];
      for (int64_t s = 0; s <= t; ++s) drow[s] = arow[s] * (drow[s] - dot) * d.scale;
      for (int64_t s = t + 1; s < d.T; ++s) drow[s] = 0.0f;
    }
    // Through scores = q @ k^T:  dq += ds @ k,  dk += ds^T @ q
    sgemm(false, false, d.T, d.HS, d.T, 1.0f, da, d.T, k, ld, beta, dq, ld);
    sgemm(true, false, d.T, d.HS, d.T, 1.0f, da, d.T, q, ld, beta, dk, ld);
  });
}

}  // namespace lab::ops::cpu
