// CPU reference of common/ops/embedding.h.
//
// Backward parallelises over channel slices, not over tokens: each thread owns a slice of every row of dwte,
// so repeated tokens never race and the sum order is fixed (deterministic, thread-count independent).
#include "common/ops/embedding.h"

#include <algorithm>

namespace lab::ops::cpu {

namespace {
// Channel slices of about 64 floats: enough work per thread, few enough to spread over the cores.
constexpr int64_t kSlice = 64;
}  // namespace

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(1), V = wte.dim(0);
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0; i < B * T; ++i)
    LAB_CHECK(tok[i] >= 0 && tok[i] < V, InvalidArgument, "embedding: token id ", tok[i], " at position ", i,
              " is outside the vocabulary [0, ", V, ")");
  const float* te = wte.data<float>();
  const float* pe = wpe.data<float>();
  float* o = out.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < B * T; ++i) {
    const float* trow = te + tok[i] * C;
    const float* prow = pe + (i % T) * C;
    float* orow = o + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) orow[c] = trow[c] + prow[c];
  }
}

void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  const int64_t BT = tokens.numel(), V = dwte.dim(0);
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0; i < BT; ++i)
    LAB_CHECK(tok[i] >= 0 && tok[i] < V, InvalidArgument, "embedding_backward: token id ", tok[i], " outside [0, ", V,
              ")");
  embedding_backward_rows(dwte, dwpe, dout, tokens, 0);
}

void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row) {
  const int64_t BT = tokens.numel(), T = tokens.dim(1), C = dout.dim(2);
  const int64_t S = dwte_rows.defined() ? dwte_rows.dim(0) : 0;
  const int32_t* tok = tokens.data<int32_t>();
  float* dte = dwte_rows.defined() ? dwte_rows.data<float>() : nullptr;
  float* dpe = dwpe.defined() ? dwpe.data<float>() : nullptr;
  const float* d = dout.data<float>();
  const int64_t slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * kSlice, c1 = std::min(C, c0 + kSlice);
    for (int64_t i = 0; i < BT; ++i) {
      const float* drow = d + i * C;
      const int64_t row = tok[i] - first_row;
      if (dte && row >= 0 && row < S) {
        float* trow = dte + row * C;
        for (int64_t c = c0; c < c1; ++c) trow[c] += drow[c];
      }
      if (dpe) {
        float* prow = dpe + (i % T) * C;
        for (int64_t c = c0; c < c1; ++c) prow[c] += drow[c];
      }
    }
  }
}

}  // namespace lab::ops::cpu
