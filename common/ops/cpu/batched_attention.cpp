// CPU reference of common/ops/batched_attention.h: attention.h's algorithm with 16-bit storage, rounding where
// the CUDA backend rounds.
//
// As in cpu/attention.cpp, each (batch, head) pair is independent and is the parallel loop. Each thread widens
// its head's q, k, v (and dout, probs) into f32 scratch of its own, so the products are single-threaded sgemms
// on contiguous f32 matrices: exactly the products of the 16-bit values, accumulated in f32, which is what
// cuBLASLt computes from 16-bit operands with fp32 accumulation. Results are rounded to the 16-bit type only
// where batched_attention.h says the CUDA backend stores them: P, out, dS, and each sum into dqkv.
#include "common/ops/batched_attention.h"

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/core/dtype.h"
#include "common/core/error.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/cpu/vec_math.h"
#include "common/ops/dispatch.h"

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

// Runs body(TypeTag<T>) for the 16-bit storage type T of `dtype`; f32 is attention.h's (the public op sends it
// there).
template <typename Body>
void dispatch_16bit(DType dtype, const char* op, Body&& body) {
  dispatch_float_dtype(dtype, op, [&](auto tag) {
    if constexpr (std::is_same_v<typename decltype(tag)::type, float>)
      fail(ErrorKind::InvalidArgument, op, ": f32 is ops::attention's (the CPU backend takes bf16 and f16)");
    else
      body(tag);
  });
}

// The [rows, cols] block at `first` with row stride `ld`, widened into the contiguous f32 matrix `dst`.
template <typename T>
void widen(float* dst, const T* first, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = to_float(first[r * ld + c]);
}

// first[r, c] = round(first[r, c] + add[r, c]): the sum in f32, rounded once (as a cuBLASLt matmul with beta = 1
// into a 16-bit D).
template <typename T>
void add_rounded(T* first, const float* add, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      first[r * ld + c] = from_float<T>(to_float(first[r * ld + c]) + add[r * cols + c]);
}

// ---------------------------------------------------------------- forward

template <typename T>
void forward(const Dims& d, const T* qkv, T* probs, T* out) {
  const int64_t ld = 3 * d.C, TT = d.T * d.T, TH = d.T * d.HS;
#pragma omp parallel
  {
    std::vector<float> scratch(static_cast<size_t>(TT + 4 * TH));  // per-thread: S / P, q, k, v, out
    float* s_rows = scratch.data();
    float* q = s_rows + TT;
    float* k = q + TH;
    float* v = k + TH;
    float* o = v + TH;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const int64_t b = bh / d.NH, h = bh % d.NH;
      const T* head = qkv + b * d.T * ld + h * d.HS;
      widen(q, head, d.T, d.HS, ld);
      widen(k, head + d.C, d.T, d.HS, ld);
      widen(v, head + 2 * d.C, d.T, d.HS, ld);
      // S = scale q k^T in f32 (the upper triangle is computed and discarded, as in cpu/attention.cpp)
      sgemm(false, true, d.T, d.T, d.HS, d.scale, q, d.HS, k, d.HS, 0.0f, s_rows, d.T);
      T* p_rows = probs + bh * TT;
      for (int64_t t = 0; t < d.T; ++t) {
        float* row = s_rows + t * d.T;
        T* p = p_rows + t * d.T;
        float mx = row[0];
        for (int64_t s = 1; s <= t; ++s) mx = row[s] > mx ? row[s] : mx;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t s = 0; s <= t; ++s) {
          row[s] = exp_fast(row[s] - mx);
          sum += row[s];
        }
        const float inv = 1.0f / sum;
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
      T* out_head = out + b * d.T * d.C + h * d.HS;
      for (int64_t t = 0; t < d.T; ++t)
        for (int64_t j = 0; j < d.HS; ++j) out_head[t * d.C + j] = from_float<T>(o[t * d.HS + j]);
    }
  }
}

// ---------------------------------------------------------------- backward

template <typename T>
void backward(const Dims& d, T* dqkv, const T* dout, const T* qkv, const T* probs) {
  const int64_t ld = 3 * d.C, TT = d.T * d.T, TH = d.T * d.HS;
#pragma omp parallel
  {
    std::vector<float> scratch(static_cast<size_t>(2 * TT + 5 * TH));  // per-thread: P, dP / dS, q, k, v, dO, sum
    float* p = scratch.data();
    float* dp = p + TT;
    float* q = dp + TT;
    float* k = q + TH;
    float* v = k + TH;
    float* dO = v + TH;
    float* product = dO + TH;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const int64_t b = bh / d.NH, h = bh % d.NH;
      const int64_t offset = b * d.T * ld + h * d.HS;
      widen(q, qkv + offset, d.T, d.HS, ld);
      widen(k, qkv + offset + d.C, d.T, d.HS, ld);
      widen(v, qkv + offset + 2 * d.C, d.T, d.HS, ld);
      widen(dO, dout + b * d.T * d.C + h * d.HS, d.T, d.HS, d.C);
      widen(p, probs + bh * TT, d.T, d.T, d.T);
      T* dq = dqkv + offset;
      T* dk = dq + d.C;
      T* dv = dq + 2 * d.C;
      // Through out = P v:  dP = dO v^T (kept in f32),  dv += P^T dO
      sgemm(false, true, d.T, d.T, d.HS, 1.0f, dO, d.HS, v, d.HS, 0.0f, dp, d.T);
      sgemm(true, false, d.T, d.HS, d.T, 1.0f, p, d.T, dO, d.HS, 0.0f, product, d.HS);
      add_rounded(dv, product, d.T, d.HS, ld);
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
      add_rounded(dq, product, d.T, d.HS, ld);
      sgemm(true, false, d.T, d.HS, d.T, 1.0f, dp, d.T, q, d.HS, 0.0f, product, d.HS);
      add_rounded(dk, product, d.T, d.HS, ld);
    }
  }
}

}  // namespace

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head) {
  const Dims d = dims_of(qkv, n_head);
  if (d.B == 0 || d.T == 0 || d.C == 0) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(d, qkv.data<T>(), probs.data<T>(), out.data<T>());
  });
}

void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head) {
  const Dims d = dims_of(qkv, n_head);
  if (d.B == 0 || d.T == 0 || d.C == 0) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward<T>(d, dqkv.data<T>(), dout.data<T>(), qkv.data<T>(), probs.data<T>());
  });
}

}  // namespace lab::ops::cpu
