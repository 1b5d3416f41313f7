// CPU reference of common/ops/embedding.h, for f32, bf16 and f16 activations (out, dout) with fp32 arithmetic;
// the tables and their gradients are f32 whatever the activations are.
//
// Backward parallelises over channel slices, not over tokens: each thread owns a slice of every row of dwte,
// so repeated tokens never race and the sum order is fixed (deterministic, thread-count independent).
#include "common/ops/embedding.h"

#include <algorithm>

#include "common/ops/dispatch.h"

namespace lab::ops::cpu {

namespace {

// Channel slices of about 64 floats: enough work per thread, few enough to spread over the cores.
constexpr int64_t kSlice = 64;

// S is the storage type of the activations (float, Bf16, F16): out = wte[token] + wpe[t], summed in f32 and
// rounded once.
template <typename S>
void forward(S* o, const int32_t* tok, const float* te, const float* pe, int64_t BT, int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < BT; ++i) {
    const float* trow = te + tok[i] * C;
    const float* prow = pe + (i % T) * C;
    S* orow = o + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) orow[c] = from_float<S>(trow[c] + prow[c]);
  }
}

// dte holds rows [first_row, first_row + rows) of dwte (null: not computed), dpe may be null too; each dout
// element of storage type S is widened to f32 (exact) before it is added. `overwrite_dpe`: the first batch row's
// positions are stored into dpe, not added.
template <typename S>
void add_gradients(float* dte, int64_t rows, int64_t first_row, float* dpe, bool overwrite_dpe, const S* d,
                   const int32_t* tok, int64_t BT, int64_t T, int64_t C) {
  const int64_t slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * kSlice, c1 = std::min(C, c0 + kSlice);
    for (int64_t i = 0; i < BT; ++i) {
      const S* drow = d + i * C;
      const int64_t row = tok[i] - first_row;
      if (dte && row >= 0 && row < rows) {
        float* trow = dte + row * C;
        for (int64_t c = c0; c < c1; ++c) trow[c] += to_float(drow[c]);
      }
      if (dpe) {
        float* prow = dpe + (i % T) * C;
        if (overwrite_dpe && i < T)
          for (int64_t c = c0; c < c1; ++c) prow[c] = to_float(drow[c]);
        else
          for (int64_t c = c0; c < c1; ++c) prow[c] += to_float(drow[c]);
      }
    }
  }
}

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(1), V = wte.dim(0);
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0; i < B * T; ++i)
    LAB_CHECK(tok[i] >= 0 && tok[i] < V, InvalidArgument, "embedding: token id ", tok[i], " at position ", i,
              " is outside the vocabulary [0, ", V, ")");
  dispatch_float_dtype(out.dtype(), "embedding_forward", [&](auto tag) {
    using S = typename decltype(tag)::type;
    forward(out.data<S>(), tok, wte.data<float>(), wpe.data<float>(), B * T, T, C);
  });
}

void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        GradWrite dwpe_write) {
  const int64_t BT = tokens.numel(), V = dwte.dim(0);
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0; i < BT; ++i)
    LAB_CHECK(tok[i] >= 0 && tok[i] < V, InvalidArgument, "embedding_backward: token id ", tok[i], " outside [0, ", V,
              ")");
  const int64_t T = tokens.dim(1), C = dout.dim(2);
  dispatch_float_dtype(dout.dtype(), "embedding_backward", [&](auto tag) {
    using S = typename decltype(tag)::type;
    add_gradients(dwte.data<float>(), V, 0, dwpe.data<float>(), dwpe_write == GradWrite::Overwrite, dout.data<S>(), tok,
                  BT, T, C);
  });
}

void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row) {
  const int64_t BT = tokens.numel(), T = tokens.dim(1), C = dout.dim(2);
  add_gradients(dwte_rows.defined() ? dwte_rows.data<float>() : nullptr, dwte_rows.defined() ? dwte_rows.dim(0) : 0,
                first_row, dwpe.defined() ? dwpe.data<float>() : nullptr, false, dout.data<float>(),
                tokens.data<int32_t>(), BT, T, C);
}

}  // namespace lab::ops::cpu
