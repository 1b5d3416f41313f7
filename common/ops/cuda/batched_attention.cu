// CUDA kernels of common/ops/batched_attention.h: cuda/attention.cu's algorithm with 16-bit storage, its products
// on tensor cores.
//
// The products are cuBLASLt matmuls with 16-bit A and B, fp32 accumulation (CUBLAS_COMPUTE_32F) and the heads as
// a strided batch (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT / STRIDED_BATCH_OFFSET), one call per batch row b. As in
// attention.cu, inside qkv[b] ([T, 3C] row-major) head h of q, k and v is the column block at h*HS of width HS:
// the leading dimension is 3C and the next head is HS elements on, so no permuted copies are made; a row-major
// product D = A @ B is issued as the column-major D^T = B^T @ A^T. Per batch row b and head h:
//   forward   S   = scale q k^T   [T,T]   matmul(T, N, T, T, HS)   16-bit q, k -> fp32 S (a workspace)
//             P   = causal softmax of S   (kernel below)            fp32 S -> 16-bit P (probs)
//             out = P v           [T,HS]  matmul(N, N, HS, T, T)   16-bit P, v -> 16-bit out
//   backward  dP  = dout v^T      [T,T]   matmul(T, N, T, T, HS)   16-bit dout, v -> fp32 dP (a workspace)
//             dv += P^T dout      [T,HS]  matmul(N, T, HS, T, T)   beta = 1 into the 16-bit dqkv (0 with
//                                                                  GradWrite::Overwrite: written, not read)
//             dS  = scale softmax backward of dP (kernel below)     16-bit P, fp32 dP -> 16-bit dS (a workspace)
//             dq += dS k          [T,HS]  matmul(N, N, HS, T, T)   beta = 1
//             dk += dS^T q        [T,HS]  matmul(N, T, HS, T, T)   beta = 1
// A matmul with beta = 1 and 16-bit C = D computes alpha op(A) op(B) + C in fp32 and rounds the sum once.
//
// Alignment: a head's matrices start HS elements apart (128 bytes at HS = 64 in 16 bits) and k, v at C, 2C
// elements into a row, less than the 256 bytes cuBLASLt's heuristic assumes unless told otherwise; each matmul
// states the alignment its operands actually have (cuda/cublaslt_matmul.cuh).
//
// Softmax kernels: one warp per row (h, t) of a batch row, kRowsPerBlock rows per block, as in attention.cu
// (cuda/attention_launch.cuh); the lanes stride over the row (coalesced) and combine with warp shuffles. Row t has
// t + 1 valid entries; the rest are written as zeros, so the full [T, T] rows are well defined for the matmuls that
// read them.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/core/memory.h"
#include "common/ops/batched_attention.h"
#include "common/ops/batched_attention_dtype.h"
#include "common/ops/cuda/attention_launch.cuh"
#include "common/ops/cuda/cublaslt_matmul.cuh"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

// Rows of fp32 scaled scores in, rows of 16-bit probabilities out: P[r, s] = softmax over s <= t of S[r, :],
// computed in fp32 and rounded when stored; 0 for s > t.
template <typename P>
__global__ void batched_causal_softmax_kernel(P* probs, const float* scores, int64_t rows, int64_t T) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;  // the whole warp leaves together: r is the warp's
  const int64_t t = r % T;
  const float* s_row = scores + r * T;
  P* p = probs + r * T;
  float mx = -INFINITY;
  for (int64_t s = lane; s <= t; s += kWarpSize) mx = fmaxf(mx, s_row[s]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t s = lane; s <= t; s += kWarpSize) sum += expf(s_row[s] - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t s = lane; s < T; s += kWarpSize) p[s] = store_as<P>(s <= t ? expf(s_row[s] - mx) * inv : 0.0f);
}

// dS[r, s] = scale P[r, s] (dP[r, s] - sum_s' P[r, s'] dP[r, s']) in fp32 from the 16-bit P and the fp32 dP,
// rounded when stored; 0 for s > t.
template <typename P>
__global__ void batched_causal_softmax_backward_kernel(P* dscores, const float* dprobs, const P* probs, int64_t rows,
                                                       int64_t T, float scale) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  const int64_t t = r % T;
  const P* p = probs + r * T;
  const float* dp = dprobs + r * T;
  P* ds = dscores + r * T;
  float dot = 0.0f;
  for (int64_t s = lane; s <= t; s += kWarpSize) dot += load(p[s]) * dp[s];
  dot = warp_sum(dot);
  for (int64_t s = lane; s < T; s += kWarpSize) ds[s] = store_as<P>(s <= t ? scale * load(p[s]) * (dp[s] - dot) : 0.0f);
}

// ---------------------------------------------------------------- cuBLASLt over the heads

// For each head: D = alpha op(A) op(B) + beta D, column-major, D [m, n]; A and B 16-bit (`a.type`), D fp32 or the
// same 16-bit type, fp32 accumulation. D is also C (beta = 1 accumulates into it); each operand's `stride` steps
// from one head's matrix to the next.
void matmul_over_heads(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, float alpha,
                       const LtMatrices& a, const LtMatrices& b, float beta, const LtMatrices& d, int heads,
                       cudaStream_t stream) {
  const char* timing =
      a.type == CUDA_R_16BF ? "cublasLt matmul bf16 (heads batched)" : "cublasLt matmul f16 (heads batched)";
  cublaslt_matmul({op_a, op_b, m, n, k, heads, "batched attention", timing}, alpha, a, b, beta, d, stream);
}

// The cuBLASLt type of the 16-bit storage type T.
template <typename T>
constexpr cudaDataType_t blas_type() {
  return std::is_same_v<T, Bf16> ? CUDA_R_16BF : CUDA_R_16F;
}

// ---------------------------------------------------------------- forward and backward, one storage type

template <typename T>
void forward(const HeadDims& d, const Tensor& out, const Tensor& probs, const Tensor& qkv) {
  using D = typename DeviceType<T>::type;
  constexpr cudaDataType_t type = blas_type<T>();
  LaunchScope scope(qkv);
  // The fp32 scores of one batch row, reused for every row: all work is on one stream, so each use of the
  // buffer runs after the previous one has finished.
  MemoryScope workspace_scope(MemCategory::Workspace);
  const Tensor scores = Tensor::empty({d.NH, d.T, d.T}, DType::F32, qkv.device());
  const int64_t rows = static_cast<int64_t>(d.NH) * d.T;
  for (int64_t b = 0; b < d.B; ++b) {
    const auto [q, k, v] = qkv_row(device_data<T>(qkv), d, b);
    D* p = device_data<T>(probs) + b * d.NH * d.TT;
    matmul_over_heads(CUBLAS_OP_T, CUBLAS_OP_N, d.T, d.T, d.HS, d.scale, {k, type, d.ld_qkv, d.HS},
                      {q, type, d.ld_qkv, d.HS}, 0.0f, {scores.raw(), CUDA_R_32F, d.T, d.TT}, d.NH, scope.stream());
    LAB_LAUNCH((batched_causal_softmax_kernel<D>), one_warp_per_row(rows, scope.stream()), p, scores.data<float>(),
               rows, static_cast<int64_t>(d.T));
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_N, d.HS, d.T, d.T, 1.0f, {v, type, d.ld_qkv, d.HS}, {p, type, d.T, d.TT},
                      0.0f, {device_data<T>(out) + b * d.T * d.C, type, d.C, d.HS}, d.NH, scope.stream());
  }
}

template <typename T>
void backward(const HeadDims& d, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
              GradWrite write) {
  using D = typename DeviceType<T>::type;
  const float beta = write == GradWrite::Add ? 1.0f : 0.0f;  // 0: dq, dk, dv written, not read
  constexpr cudaDataType_t type = blas_type<T>();
  LaunchScope scope(qkv);
  // dP (fp32) and dS (16-bit) of one batch row, reused for every row as the forward's scores are.
  MemoryScope workspace_scope(MemCategory::Workspace);
  const Tensor dprobs = Tensor::empty({d.NH, d.T, d.T}, DType::F32, qkv.device());
  const Tensor dscores = Tensor::empty({d.NH, d.T, d.T}, qkv.dtype(), qkv.device());
  D* ds = device_data<T>(dscores);
  const int64_t rows = static_cast<int64_t>(d.NH) * d.T;
  for (int64_t b = 0; b < d.B; ++b) {
    const auto [q, k, v] = qkv_row(device_data<T>(qkv), d, b);
    const auto [dq, dk, dv] = qkv_row(device_data<T>(dqkv), d, b);
    const D* p = device_data<T>(probs) + b * d.NH * d.TT;
    const D* dO = device_data<T>(dout) + b * d.T * d.C;
    matmul_over_heads(CUBLAS_OP_T, CUBLAS_OP_N, d.T, d.T, d.HS, 1.0f, {v, type, d.ld_qkv, d.HS}, {dO, type, d.C, d.HS},
                      0.0f, {dprobs.raw(), CUDA_R_32F, d.T, d.TT}, d.NH, scope.stream());
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_T, d.HS, d.T, d.T, 1.0f, {dO, type, d.C, d.HS}, {p, type, d.T, d.TT}, beta,
                      {dv, type, d.ld_qkv, d.HS}, d.NH, scope.stream());
    LAB_LAUNCH((batched_causal_softmax_backward_kernel<D>), one_warp_per_row(rows, scope.stream()), ds,
               dprobs.data<float>(), p, rows, static_cast<int64_t>(d.T), d.scale);
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_N, d.HS, d.T, d.T, 1.0f, {k, type, d.ld_qkv, d.HS}, {ds, type, d.T, d.TT},
                      beta, {dq, type, d.ld_qkv, d.HS}, d.NH, scope.stream());
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_T, d.HS, d.T, d.T, 1.0f, {q, type, d.ld_qkv, d.HS}, {ds, type, d.T, d.TT},
                      beta, {dk, type, d.ld_qkv, d.HS}, d.NH, scope.stream());
  }
}

}  // namespace

// ---------------------------------------------------------------- launchers

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head) {
  const HeadDims d = head_dims(qkv, n_head);
  if (d.empty()) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_forward", "CUDA",
                 [&](auto tag) { forward<typename decltype(tag)::type>(d, out, probs, qkv); });
}

void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head, GradWrite dqkv_write) {
  const HeadDims d = head_dims(qkv, n_head);
  if (d.empty()) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_backward", "CUDA",
                 [&](auto tag) { backward<typename decltype(tag)::type>(d, dqkv, dout, qkv, probs, dqkv_write); });
}

}  // namespace lab::ops::cuda
