// CPU reference of common/ops/batched_attention.h: attention.h's algorithm with 16-bit storage, rounding where
// the CUDA backend rounds.
//
// As in cpu/attention.cpp, each (batch, head) pair is independent and is the parallel loop
// (cpu/materialised_attention.h). Each thread widens its head's q, k, v (and dout, probs) into f32 scratch of its
// own, so the products are single-threaded sgemms on contiguous f32 matrices: exactly the products of the 16-bit
// values, accumulated in f32, which is what cuBLASLt computes from 16-bit operands with fp32 accumulation. Results
// are rounded to the 16-bit type only where batched_attention.h says the CUDA backend stores them: P, out, dS, and
// each sum into dqkv.
#include "common/ops/batched_attention.h"

#include <cstdint>

#include "common/core/dtype.h"
#include "common/ops/attention_shape.h"
#include "common/ops/batched_attention_dtype.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/cpu/materialised_attention.h"

namespace lab::ops::cpu {

namespace {

// The [rows, cols] block at `first` with row stride `ld`, widened into the contiguous f32 matrix `dst`.
template <typename T>
void widen(float* dst, const T* first, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = to_float(first[r * ld + c]);
}

// One head's q, k and v ([T, HS] each, q at `head` in qkv) widened into the contiguous f32 matrices q, k, v.
template <typename T>
void widen_qkv(const AttentionDims& d, const T* head, float* q, float* k, float* v) {
  const int64_t ld = 3 * d.C;
  widen(q, head, d.T, d.HS, ld);
  widen(k, head + d.C, d.T, d.HS, ld);
  widen(v, head + 2 * d.C, d.T, d.HS, ld);
}

// first[r, c] = round(first[r, c] + add[r, c]): the sum in f32, rounded once (as a cuBLASLt matmul with beta = 1
// into a 16-bit D); with GradWrite::Overwrite, round(add[r, c]), first not read (beta = 0).
template <typename T>
void add_rounded(T* first, const float* add, int64_t rows, int64_t cols, int64_t ld, GradWrite write) {
  const bool accumulate = write == GradWrite::Add;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      T& dst = first[r * ld + c];
      dst = from_float<T>(accumulate ? to_float(dst) + add[r * cols + c] : add[r * cols + c]);
    }
}

// ---------------------------------------------------------------- forward

template <typename T>
void forward(const AttentionDims& d, const T* qkv, T* probs, T* out) {
  const int64_t TT = d.T * d.T, TH = d.T * d.HS;
  // Each thread's scratch: S (then P), q, k, v, out.
  parallel_over_heads(d, TT + 4 * TH, [&](const HeadOffsets& at, float* s_rows) {
    float* q = s_rows + TT;
    float* k = q + TH;
    float* v = k + TH;
    float* o = v + TH;
    widen_qkv(d, qkv + at.qkv, q, k, v);
    // S = scale q k^T in f32 (the upper triangle is computed and discarded, as in cpu/attention.cpp)
    sgemm(false, true, d.T, d.T, d.HS, d.scale, q, d.HS, k, d.HS, 0.0f, s_rows, d.T);
    T* p_rows = probs + at.probs;
    for (int64_t t = 0; t < d.T; ++t) {
      float* row = s_rows + t * d.T;
      T* p = p_rows + t * d.T;
      const float inv = 1.0f / exponentiate_causal_row(row, t);
      // P rounded when stored; the product below multiplies the rounded values, as the GPU's does.
      for (int64_t s = 0; s <= t; ++s) {
        p[s] = from_float<T>(row[s] * inv);
        row[s] = to_float(p[s]);
      }
      for (int64_t s = t + 1; s < d.T; ++s) {
        p[s] = from_float<T>(0.0f);
        row[s] = 0.0f;
      }
    }
    // out = P v, rounded when stored
    sgemm(false, false, d.T, d.HS, d.T, 1.0f, s_rows, d.T, v, d.HS, 0.0f, o, d.HS);
    T* out_head = out + at.out;
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t j = 0; j < d.HS; ++j) out_head[t * d.C + j] = from_float<T>(o[t * d.HS + j]);
  });
}

// ---------------------------------------------------------------- backward

template <typename T>
void backward(const AttentionDims& d, T* dqkv, const T* dout, const T* qkv, const T* probs, GradWrite write) {
  const int64_t ld = 3 * d.C, TT = d.T * d.T, TH = d.T * d.HS;
  // Each thread's scratch: P, dP (then dS), q, k, v, dO, a product.
  parallel_over_heads(d, 2 * TT + 5 * TH, [&](const HeadOffsets& at, float* p) {
    float* dp = p + TT;
    float* q = dp + TT;
    float* k = q + TH;
    float* v = k + TH;
    float* dO = v + TH;
    float* product = dO + TH;
    widen_qkv(d, qkv + at.qkv, q, k, v);
    widen(dO, dout + at.out, d.T, d.HS, d.C);
    widen(p, probs + at.probs, d.T, d.T, d.T);
    T* dq = dqkv + at.qkv;
    T* dk = dq + d.C;
    T* dv = dq + 2 * d.C;
    // Through out = P v:  dP = dO v^T (kept in f32),  dv += P^T dO
    sgemm(false, true, d.T, d.T, d.HS, 1.0f, dO, d.HS, v, d.HS, 0.0f, dp, d.T);
    sgemm(true, false, d.T, d.HS, d.T, 1.0f, p, d.T, dO, d.HS, 0.0f, product, d.HS);
    add_rounded(dv, product, d.T, d.HS, ld, write);
    // Through the softmax: dS = scale P (dP - rowsum(P dP)) in f32, rounded; zero above the diagonal.
    for (int64_t t = 0; t < d.T; ++t) {
      const float* prow = p + t * d.T;
      float* drow = dp + t * d.T;
      float dot = 0.0f;
      for (int64_t s = 0; s <= t; ++s) dot += prow[s] * drow[s];
      for (int64_t s = 0; s <= t; ++s) drow[s] = to_float(from_float<T>(d.scale * prow[s] * (drow[s] - dot)));
      for (int64_t s = t + 1; s < d.T; ++s) drow[s] = 0.0f;
    }
    // Through S = scale q k^T:  dq += dS k,  dk += dS^T q
    sgemm(false, false, d.T, d.HS, d.T, 1.0f, dp, d.T, k, d.HS, 0.0f, product, d.HS);
    add_rounded(dq, product, d.T, d.HS, ld, write);
    sgemm(true, false, d.T, d.HS, d.T, 1.0f, dp, d.T, q, d.HS, 0.0f, product, d.HS);
    add_rounded(dk, product, d.T, d.HS, ld, write);
  });
}

}  // namespace

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head) {
  const AttentionDims d = attention_dims(qkv, n_head);
  if (d.empty()) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_forward", "CPU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(d, qkv.data<T>(), probs.data<T>(), out.data<T>());
  });
}

void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head, GradWrite dqkv_write) {
  const AttentionDims d = attention_dims(qkv, n_head);
  if (d.empty()) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_backward", "CPU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward<T>(d, dqkv.data<T>(), dout.data<T>(), qkv.data<T>(), probs.data<T>(), dqkv_write);
  });
}

}  // namespace lab::ops::cpu
