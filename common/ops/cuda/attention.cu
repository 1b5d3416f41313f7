// CUDA kernels of common/ops/attention.h: causal self-attention with the softmax matrix materialised.
//
// The two products of attention go through cuBLAS, one strided-batched sgemm per batch row b whose batch
// runs over the heads: inside qkv[b] ([T, 3C] row-major) the head h of q, k and v is the column block
// starting at h*HS of width HS, so "next head" is a stride of HS elements and every row is 3C apart
// (the leading dimension). No permuted copies of q, k, v are needed. As in linear.cu, a row-major
// product D = A @ B is issued as the column-major D^T = B^T @ A^T. Per batch row b and head h:
//   forward   S   = scale * q k^T   [T,T]   sgemm(T, N, T, T, HS)   into att
//             att = causal softmax of S     (kernel below; zeros above the diagonal)
//             out = att v           [T,HS]  sgemm(N, N, HS, T, T)
//   backward  dA  = dout v^T        [T,T]   sgemm(T, N, T, T, HS)   into a workspace
//             dv += att^T dout      [T,HS]  sgemm(N, T, HS, T, T)
//             dS  = scale * softmax backward of dA (kernel below; zeros above the diagonal)
//             dq += dS k            [T,HS]  sgemm(N, N, HS, T, T)
//             dk += dS^T q          [T,HS]  sgemm(N, T, HS, T, T)
// The sgemms run in the math mode of common/cuda/cublas.h (strict fp32, or TF32 when enabled). With
// GradWrite::Overwrite, the three into dqkv run with beta = 0: each element is written by one of them, none read.
//
// Softmax kernels: one warp per row (b, h, t), kRowsPerBlock rows per block (cuda/attention_launch.cuh); the
// lanes stride over the row (coalesced) and combine with warp shuffles. Row t has t + 1 valid entries; the rest
// are written as zeros, so the full [T, T] rows are well defined for the sgemms that read them.
#include <cmath>

#include "common/cuda/cublas.h"
#include "common/cuda/kernel_timing.h"
#include "common/cuda/stream.h"
#include "common/ops/attention.h"
#include "common/ops/cuda/attention_launch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

// In place over rows of scaled scores: att[r, s] = softmax over s <= t of the row, 0 for s > t.
__global__ void causal_softmax_kernel(float* att, int64_t rows, int64_t T) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  const int64_t t = r % T;
  float* a = att + r * T;
  float mx = -INFINITY;
  for (int64_t s = lane; s <= t; s += kWarpSize) mx = fmaxf(mx, a[s]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t s = lane; s <= t; s += kWarpSize) sum += expf(a[s] - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t s = lane; s < T; s += kWarpSize) a[s] = s <= t ? expf(a[s] - mx) * inv : 0.0f;
}

// In place over rows of dA: dS[r, s] = scale * att[r, s] * (dA[r, s] - sum_s' att[r, s'] dA[r, s']).
__global__ void causal_softmax_backward_kernel(float* datt, const float* att, int64_t rows, int64_t T, float scale) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  const int64_t t = r % T;
  const float* a = att + r * T;
  float* d = datt + r * T;
  float dot = 0.0f;
  for (int64_t s = lane; s <= t; s += kWarpSize) dot += a[s] * d[s];
  dot = warp_sum(dot);
  for (int64_t s = lane; s < T; s += kWarpSize) d[s] = s <= t ? scale * a[s] * (d[s] - dot) : 0.0f;
}

// ---------------------------------------------------------------- cuBLAS

// Column-major C = alpha op(A) op(B) + beta C for each head: A, B, C advance by their strides per head.
void gemm_over_heads(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, float alpha, const float* a,
                     int lda, int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                     int ldc, int64_t stride_c, int heads) {
  const lab::cuda::KernelTiming timing(
      lab::cuda::tf32_enabled() ? "cublasSgemmStridedBatched tf32" : "cublasSgemmStridedBatched",
      lab::cuda::current_stream());
  CUBLAS_CHECK(cublasSgemmStridedBatched(lab::cuda::cublas_handle(), op_a, op_b, m, n, k, &alpha, a, lda, stride_a, b,
                                         ldb, stride_b, &beta, c, ldc, stride_c, heads));
}

}  // namespace

// ---------------------------------------------------------------- launchers

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head) {
  const HeadDims d = head_dims(qkv, n_head);
  if (d.empty()) return;
  LaunchScope scope(qkv);
  for (int64_t b = 0; b < d.B; ++b) {
    const QkvRow<float> row = qkv_row(qkv.data<float>(), d, b);
    float* att_b = att.data<float>() + b * d.NH * d.TT;
    gemm_over_heads(CUBLAS_OP_T, CUBLAS_OP_N, d.T, d.T, d.HS, d.scale, row.k, d.ld_qkv, d.HS, row.q, d.ld_qkv, d.HS,
                    0.0f, att_b, d.T, d.TT, d.NH);
  }
  const int64_t rows = d.B * d.NH * d.T;
  LAB_LAUNCH(causal_softmax_kernel, one_warp_per_row(rows, scope.stream()), att.data<float>(), rows, d.T);
  for (int64_t b = 0; b < d.B; ++b) {
    const float* v = qkv_row(qkv.data<float>(), d, b).v;
    const float* att_b = att.data<float>() + b * d.NH * d.TT;
    float* out_b = out.data<float>() + b * d.T * d.C;
    gemm_over_heads(CUBLAS_OP_N, CUBLAS_OP_N, d.HS, d.T, d.T, 1.0f, v, d.ld_qkv, d.HS, att_b, d.T, d.TT, 0.0f, out_b,
                    d.C, d.HS, d.NH);
  }
}

void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head,
                        GradWrite dqkv_write) {
  const HeadDims d = head_dims(qkv, n_head);
  const float beta = dqkv_write == GradWrite::Add ? 1.0f : 0.0f;  // 0: dq, dk, dv written, not read
  if (d.empty()) return;
  LaunchScope scope(qkv);
  // dA / dS of one batch row, reused for every row: all work is on one stream, so each use of the
  // buffer runs after the previous one has finished.
  MemoryScope workspace_scope(MemCategory::Workspace);
  const Tensor workspace = Tensor::empty({d.NH, d.T, d.T}, DType::F32, qkv.device());
  float* dA = workspace.data<float>();
  const int64_t rows = static_cast<int64_t>(d.NH) * d.T;
  for (int64_t b = 0; b < d.B; ++b) {
    const auto [q, k, v] = qkv_row(qkv.data<float>(), d, b);
    const auto [dq, dk, dv] = qkv_row(dqkv.data<float>(), d, b);
    const float* att_b = att.data<float>() + b * d.NH * d.TT;
    const float* dout_b = dout.data<float>() + b * d.T * d.C;
    gemm_over_heads(CUBLAS_OP_T, CUBLAS_OP_N, d.T, d.T, d.HS, 1.0f, v, d.ld_qkv, d.HS, dout_b, d.C, d.HS, 0.0f, dA, d.T,
                    d.TT, d.NH);
    gemm_over_heads(CUBLAS_OP_N, CUBLAS_OP_T, d.HS, d.T, d.T, 1.0f, dout_b, d.C, d.HS, att_b, d.T, d.TT, beta, dv,
                    d.ld_qkv, d.HS, d.NH);
    LAB_LAUNCH(causal_softmax_backward_kernel, one_warp_per_row(rows, scope.stream()), dA, att_b, rows, d.T, d.scale);
    gemm_over_heads(CUBLAS_OP_N, CUBLAS_OP_N, d.HS, d.T, d.T, 1.0f, k, d.ld_qkv, d.HS, dA, d.T, d.TT, beta, dq,
                    d.ld_qkv, d.HS, d.NH);
    gemm_over_heads(CUBLAS_OP_N, CUBLAS_OP_T, d.HS, d.T, d.T, 1.0f, q, d.ld_qkv, d.HS, dA, d.T, d.TT, beta, dk,
                    d.ld_qkv, d.HS, d.NH);
  }
}

}  // namespace lab::ops::cuda
