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
//             dv += P^T dout      [T,HS]  matmul(N, T, HS, T, T)   beta = 1 into the 16-bit dqkv
//             dS  = scale softmax backward of dP (kernel below)     16-bit P, fp32 dP -> 16-bit dS (a workspace)
//             dq += dS k          [T,HS]  matmul(N, N, HS, T, T)   beta = 1
//             dk += dS^T q        [T,HS]  matmul(N, T, HS, T, T)   beta = 1
// A matmul with beta = 1 and 16-bit C = D computes alpha op(A) op(B) + C in fp32 and rounds the sum once.
//
// Alignment: cuBLASLt's heuristic assumes 256-byte-aligned matrices unless told otherwise, and a head's matrices
// start HS elements apart (128 bytes at HS = 64 in 16 bits) and k, v at C, 2C elements into a row. Each call
// states the alignment its pointers and batch strides actually have, so the heuristic picks an algorithm that
// works with it.
//
// Softmax kernels: one warp per row (h, t) of a batch row, kRowsPerBlock rows per block, as in attention.cu; the
// lanes stride over the row (coalesced) and combine with warp shuffles. Row t has t + 1 valid entries; the rest
// are written as zeros, so the full [T, T] rows are well defined for the matmuls that read them.
#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/core/memory.h"
#include "common/cuda/cublas.h"
#include "common/cuda/kernel_timing.h"
#include "common/ops/batched_attention.h"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/dispatch.h"

namespace lab::ops::cuda {

namespace {

constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

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

// Shapes of one call, in elements; the heads are the batch.
struct Dims {
  int T, C, HS, NH;
  float scale;  // 1 / sqrt(HS)
};

Dims dims_of(const Tensor& qkv, int n_head) {
  const int C = as_blas_int(qkv.dim(2), "qkv width (3C)") / 3;
  const int HS = C / n_head;
  return {as_blas_int(qkv.dim(1), "sequence length"), C, HS, n_head, 1.0f / std::sqrt(static_cast<float>(HS))};
}

// One operand of a matmul over the heads: the first head's column-major matrix at `data` (leading dimension
// `ld`), each next head's `stride` elements on, all of `type`.
struct HeadMatrices {
  const void* data;
  cudaDataType_t type;
  int ld;
  int64_t stride;
};

// The descriptors of one cuBLASLt matmul, destroyed at the end of the scope (also when a check throws).
struct LtDescriptors {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    for (cublasLtMatrixLayout_t layout : {a, b, d})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

size_t element_bytes(cudaDataType_t type) {
  return type == CUDA_R_32F ? 4 : 2;
}

// The layout of `heads` matrices of rows x cols as `m` describes them.
cublasLtMatrixLayout_t head_layout(const HeadMatrices& m, int rows, int cols, int heads) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, m.type, rows, cols, m.ld));
  const int32_t count = heads;
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride,
                                                sizeof(m.stride)));
  return layout;
}

// The largest power of two, up to cuBLASLt's default assumption of 256, that divides the byte address of every
// head's matrix: the first's address and the stride between them.
uint32_t alignment_of(const HeadMatrices& m) {
  const uint64_t bytes = reinterpret_cast<uintptr_t>(m.data) | static_cast<uint64_t>(m.stride) * element_bytes(m.type);
  uint32_t alignment = 1;
  while (alignment < 256 && bytes % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

// For each head: D = alpha op(A) op(B) + beta D, column-major, D [m, n]; A and B 16-bit (`a.type`), D fp32 or the
// same 16-bit type, fp32 accumulation. D is also C (beta = 1 accumulates into it).
void matmul_over_heads(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, float alpha,
                       const HeadMatrices& a, const HeadMatrices& b, float beta, const HeadMatrices& d, int heads,
                       cudaStream_t stream) {
  LtDescriptors lt;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  // Stored shapes: op(A) is m x k, op(B) is k x n.
  lt.a = head_layout(a, op_a == CUBLAS_OP_N ? m : k, op_a == CUBLAS_OP_N ? k : m, heads);
  lt.b = head_layout(b, op_b == CUBLAS_OP_N ? k : n, op_b == CUBLAS_OP_N ? n : k, heads);
  lt.d = head_layout(d, m, n, heads);
  const lab::cuda::BlasWorkspace workspace = lab::cuda::blas_workspace();
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&lt.preference));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(lt.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace.bytes, sizeof(workspace.bytes)));
  const uint32_t alignments[] = {alignment_of(a), alignment_of(b), alignment_of(d), alignment_of(d)};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(lt.preference, alignment_attributes[i], &alignments[i],
                                                      sizeof(alignments[i])));
  const cublasLtHandle_t handle = lab::cuda::cublaslt_handle();
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(handle, lt.desc, lt.a, lt.b, lt.d, lt.d, lt.preference, 1, &heuristic, &found));
  LAB_CHECK(found > 0, Unsupported, "batched attention: cuBLASLt has no algorithm for ", heads, " products of ", m,
            " x ", k, " and ", k, " x ", n);
  const lab::cuda::KernelTiming timing(
      a.type == CUDA_R_16BF ? "cublasLt matmul bf16 (heads batched)" : "cublasLt matmul f16 (heads batched)", stream);
  void* out = const_cast<void*>(d.data);
  CUBLAS_CHECK(cublasLtMatmul(handle, lt.desc, &alpha, a.data, lt.a, b.data, lt.b, &beta, out, lt.d, out, lt.d,
                              &heuristic.algo, workspace.data, workspace.bytes, stream));
}

unsigned int softmax_grid(int64_t rows) {
  return grid_for(rows, kRowsPerBlock);
}

// The cuBLASLt type of the 16-bit storage type T.
template <typename T>
constexpr cudaDataType_t blas_type() {
  return std::is_same_v<T, Bf16> ? CUDA_R_16BF : CUDA_R_16F;
}

// Runs body(TypeTag<T>) for the 16-bit storage type T of `dtype`; f32 is attention.h's (the public op sends it
// there).
template <typename Body>
void dispatch_16bit(DType dtype, const char* op, Body&& body) {
  dispatch_float_dtype(dtype, op, [&](auto tag) {
    if constexpr (std::is_same_v<typename decltype(tag)::type, float>)
      fail(ErrorKind::InvalidArgument, op, ": f32 is ops::attention's (the CUDA backend takes bf16 and f16)");
    else
      body(tag);
  });
}

// ---------------------------------------------------------------- forward and backward, one storage type

template <typename T>
void forward(const Dims& d, int64_t B, const Tensor& out, const Tensor& probs, const Tensor& qkv) {
  using D = typename DeviceType<T>::type;
  constexpr cudaDataType_t type = blas_type<T>();
  LaunchScope scope(qkv);
  const int64_t TT = static_cast<int64_t>(d.T) * d.T;
  const int ld_qkv = 3 * d.C;
  // The fp32 scores of one batch row, reused for every row: all work is on one stream, so each use of the
  // buffer runs after the previous one has finished.
  MemoryScope workspace_scope(MemCategory::Workspace);
  const Tensor scores = Tensor::empty({d.NH, d.T, d.T}, DType::F32, qkv.device());
  const int64_t rows = static_cast<int64_t>(d.NH) * d.T;
  for (int64_t b = 0; b < B; ++b) {
    const D* q = device_data<T>(qkv) + b * d.T * ld_qkv;
    const D* k = q + d.C;
    const D* v = q + 2 * d.C;
    D* p = device_data<T>(probs) + b * d.NH * TT;
    matmul_over_heads(CUBLAS_OP_T, CUBLAS_OP_N, d.T, d.T, d.HS, d.scale, {k, type, ld_qkv, d.HS},
                      {q, type, ld_qkv, d.HS}, 0.0f, {scores.raw(), CUDA_R_32F, d.T, TT}, d.NH, scope.stream());
    LAB_LAUNCH((batched_causal_softmax_kernel<D>), {softmax_grid(rows), kBlockSize, 0, scope.stream()}, p,
               scores.data<float>(), rows, static_cast<int64_t>(d.T));
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_N, d.HS, d.T, d.T, 1.0f, {v, type, ld_qkv, d.HS}, {p, type, d.T, TT}, 0.0f,
                      {device_data<T>(out) + b * d.T * d.C, type, d.C, d.HS}, d.NH, scope.stream());
  }
}

template <typename T>
void backward(const Dims& d, int64_t B, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
              const Tensor& probs) {
  using D = typename DeviceType<T>::type;
  constexpr cudaDataType_t type = blas_type<T>();
  LaunchScope scope(qkv);
  const int64_t TT = static_cast<int64_t>(d.T) * d.T;
  const int ld_qkv = 3 * d.C;
  // dP (fp32) and dS (16-bit) of one batch row, reused for every row as the forward's scores are.
  MemoryScope workspace_scope(MemCategory::Workspace);
  const Tensor dprobs = Tensor::empty({d.NH, d.T, d.T}, DType::F32, qkv.device());
  const Tensor dscores = Tensor::empty({d.NH, d.T, d.T}, qkv.dtype(), qkv.device());
  D* ds = device_data<T>(dscores);
  const int64_t rows = static_cast<int64_t>(d.NH) * d.T;
  for (int64_t b = 0; b < B; ++b) {
    const D* q = device_data<T>(qkv) + b * d.T * ld_qkv;
    const D* k = q + d.C;
    const D* v = q + 2 * d.C;
    D* dq = device_data<T>(dqkv) + b * d.T * ld_qkv;
    D* dk = dq + d.C;
    D* dv = dq + 2 * d.C;
    const D* p = device_data<T>(probs) + b * d.NH * TT;
    const D* dO = device_data<T>(dout) + b * d.T * d.C;
    matmul_over_heads(CUBLAS_OP_T, CUBLAS_OP_N, d.T, d.T, d.HS, 1.0f, {v, type, ld_qkv, d.HS}, {dO, type, d.C, d.HS},
                      0.0f, {dprobs.raw(), CUDA_R_32F, d.T, TT}, d.NH, scope.stream());
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_T, d.HS, d.T, d.T, 1.0f, {dO, type, d.C, d.HS}, {p, type, d.T, TT}, 1.0f,
                      {dv, type, ld_qkv, d.HS}, d.NH, scope.stream());
    LAB_LAUNCH((batched_causal_softmax_backward_kernel<D>), {softmax_grid(rows), kBlockSize, 0, scope.stream()}, ds,
               dprobs.data<float>(), p, rows, static_cast<int64_t>(d.T), d.scale);
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_N, d.HS, d.T, d.T, 1.0f, {k, type, ld_qkv, d.HS}, {ds, type, d.T, TT},
                      1.0f, {dq, type, ld_qkv, d.HS}, d.NH, scope.stream());
    matmul_over_heads(CUBLAS_OP_N, CUBLAS_OP_T, d.HS, d.T, d.T, 1.0f, {q, type, ld_qkv, d.HS}, {ds, type, d.T, TT},
                      1.0f, {dk, type, ld_qkv, d.HS}, d.NH, scope.stream());
  }
}

}  // namespace

// ---------------------------------------------------------------- launchers

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head) {
  const int64_t B = qkv.dim(0);
  const Dims d = dims_of(qkv, n_head);
  if (B == 0 || d.T == 0 || d.C == 0) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_forward",
                 [&](auto tag) { forward<typename decltype(tag)::type>(d, B, out, probs, qkv); });
}

void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head) {
  const int64_t B = qkv.dim(0);
  const Dims d = dims_of(qkv, n_head);
  if (B == 0 || d.T == 0 || d.C == 0) return;
  dispatch_16bit(qkv.dtype(), "batched_attention_backward",
                 [&](auto tag) { backward<typename decltype(tag)::type>(d, B, dqkv, dout, qkv, probs); });
}

}  // namespace lab::ops::cuda
