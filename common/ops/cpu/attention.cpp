// CPU reference of common/ops/attention.h.
//
// Each (batch, head) pair is independent, so the loop over pairs is the parallel loop; inside it the two
// products of attention are small GEMMs over strided views of qkv (q, k, v are column blocks of width HS
// inside rows of width 3C), issued single-threaded because we are already inside the parallel region.
#include "common/ops/attention.h"

#include <cmath>
#include <vector>

#include "common/ops/cpu/gemm.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ops::cpu {

namespace {

struct Dims {
  int64_t B, T, C, NH, HS;
  float scale;
};

Dims dims_of(const Tensor& qkv, int n_head) {
  const int64_t C = qkv.dim(2) / 3;
  return {qkv.dim(0), qkv.dim(1), C, n_head, C / n_head, 1.0f / std::sqrt(static_cast<float>(C / n_head))};
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head) {
  const Dims d = dims_of(qkv, n_head);
  const float* base = qkv.data<float>();
  float* att_base = att.data<float>();
  float* out_base = out.data<float>();
  const int64_t ld = 3 * d.C;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
    const int64_t b = bh / d.NH, h = bh % d.NH;
    const float* q = base + b * d.T * ld + h * d.HS;
    const float* k = q + d.C;
    const float* v = q + 2 * d.C;
    float* a = att_base + bh * d.T * d.T;
    // a[t, s] = scale * q_t . k_s  (the upper triangle is computed and then discarded; at these sizes a
    // full GEMM is faster than a triangular loop)
    sgemm(false, true, d.T, d.T, d.HS, d.scale, q, ld, k, ld, 0.0f, a, d.T);
    for (int64_t t = 0; t < d.T; ++t) {
      float* row = a + t * d.T;
      float mx = row[0];
      for (int64_t s = 1; s <= t; ++s) mx = row[s] > mx ? row[s] : mx;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t s = 0; s <= t; ++s) {
        row[s] = exp_fast(row[s] - mx);
        sum += row[s];
      }
      const float inv = 1.0f / sum;
      for (int64_t s = 0; s <= t; ++s) row[s] *= inv;
      for (int64_t s = t + 1; s < d.T; ++s) row[s] = 0.0f;
    }
    // out[t, h-block] = sum_s a[t, s] v_s
    sgemm(false, false, d.T, d.HS, d.T, 1.0f, a, d.T, v, ld, 0.0f, out_base + b * d.T * d.C + h * d.HS, d.C);
  }
}

void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head) {
  const Dims d = dims_of(qkv, n_head);
  const float* base = qkv.data<float>();
  const float* att_base = att.data<float>();
  const float* dout_base = dout.data<float>();
  float* dbase = dqkv.data<float>();
  const int64_t ld = 3 * d.C;
#pragma omp parallel
  {
    std::vector<float> datt(static_cast<size_t>(d.T * d.T));  // per-thread scratch
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const int64_t b = bh / d.NH, h = bh % d.NH;
      const int64_t offset = b * d.T * ld + h * d.HS;
      const float* q = base + offset;
      const float* k = q + d.C;
      const float* v = q + 2 * d.C;
      float* dq = dbase + offset;
      float* dk = dq + d.C;
      float* dv = dq + 2 * d.C;
      const float* a = att_base + bh * d.T * d.T;
      const float* dO = dout_base + b * d.T * d.C + h * d.HS;
      float* da = datt.data();
      // Through out = a @ v:  da = dO @ v^T,  dv += a^T @ dO
      sgemm(false, true, d.T, d.T, d.HS, 1.0f, dO, d.C, v, ld, 0.0f, da, d.T);
      sgemm(true, false, d.T, d.HS, d.T, 1.0f, a, d.T, dO, d.C, 1.0f, dv, ld);
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
      sgemm(false, false, d.T, d.HS, d.T, 1.0f, da, d.T, k, ld, 1.0f, dq, ld);
      sgemm(true, false, d.T, d.HS, d.T, 1.0f, da, d.T, q, ld, 1.0f, dk, ld);
    }
  }
}

}  // namespace lab::ops::cpu
