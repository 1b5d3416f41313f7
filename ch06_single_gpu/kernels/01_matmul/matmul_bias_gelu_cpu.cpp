// CPU path of ch06_single_gpu/matmul_bias_gelu.h: the epilogue fused by blocks of rows (GELU's backward, the
// dgelu epilogue, too: each block's product, then gelu'(pre_gelu) times it into out).
//
// Unfused, the GEMM writes all of out (M x N floats, 50 MB for GPT-2's c_fc at B*T = 4096), and the bias and
// GELU passes then read it back and write it again. Here each thread takes a block of rows at a time: it
// writes the bias into the block, runs the block's GEMM onto it (beta = 1: the bias costs no pass of its own),
// and applies GELU to the block while it is still in cache. The block's GEMM runs on one thread (OpenBLAS
// does not start threads of its own inside a parallel region).
//
// The block size is a trade: every GEMM call packs all of B (K x N) again, so small blocks pay that packing
// many times. Measured on the 2-core Xeon (M = 1024 and 4096, N = 3072, K = 768): blocks of 21, 64 and 128
// rows were slower than the unfused passes, 256 rows as fast (within the spread of repeats). On a CPU whose
// last-level cache holds all of out (this one has 260 MB of L3), the unfused passes find out in cache too,
// and the GEMM is some 93% of the time: fusing buys little here. The ch06 README has the numbers.
#include <algorithm>

#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/core/memory.h"
#include "common/ops/convert.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/gelu.h"

namespace lab::ch06::cpu {

namespace {

// Rows per block: enough that packing B once per block costs little against the block's multiply-adds.
constexpr int64_t kBlockRows = 256;

void fused_f32(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
               const Tensor& bias, Epilogue epilogue) {
  const int64_t M = a.dim(0), K = a.dim(1), N = out.dim(1);
  const bool gelu = epilogue == Epilogue::Gelu || epilogue == Epilogue::BiasGelu;
  const bool gelu_grad = epilogue == Epilogue::GeluGrad;
  // The GEMM writes where the value before the GELU is kept: pre_gelu when the caller wants it. GELU's backward
  // reads pre_gelu: its product goes to a workspace, which GELU's backward reads block by block into out.
  Tensor product = pre_gelu.defined() ? pre_gelu : out;
  if (gelu_grad) {
    MemoryScope scope(MemCategory::Workspace);
    product = Tensor::empty(out.shape(), DType::F32);
  }
  const int64_t blocks = (M + kBlockRows - 1) / kBlockRows;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t r0 = blk * kBlockRows, rows = std::min(M, r0 + kBlockRows) - r0;
    const Tensor dst = product.view(r0 * N, {rows, N});
    float* d = dst.data<float>();
    if (bias.defined())
      for (int64_t i = 0; i < rows; ++i) std::copy_n(bias.data<float>(), N, d + i * N);
    ops::cpu::sgemm(false, b_transposed, rows, N, K, 1.0f, a.data<float>() + r0 * K, K, b.data<float>(),
                    b_transposed ? K : N, bias.defined() ? 1.0f : 0.0f, d, N);
    if (gelu) ops::cpu::gelu_forward(out.view(r0 * N, {rows, N}), dst);
    if (gelu_grad)  // out's rows get gelu'(pre) * product, written over
      ops::cpu::gelu_backward(out.view(r0 * N, {rows, N}), pre_gelu.view(r0 * N, {rows, N}), dst,
                              ops::GradWrite::Overwrite);
  }
}

}  // namespace

void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue) {
  if (a.dtype() == DType::F32) {
    fused_f32(out, pre_gelu, a, b, b_transposed, bias, epilogue);
    return;
  }
  // 16-bit inputs: the products in fp32 on fp32 copies (exact: bf16 and fp16 values are floats), outputs rounded
  // once. The copies are the call's workspace, whatever the caller's memory category (a weight's copy is not a
  // parameter).
  MemoryScope scope(MemCategory::Workspace);
  const auto as_f32 = [](const Tensor& t) {
    if (!t.defined() || t.dtype() == DType::F32) return t;
    const Tensor copy = Tensor::empty(t.shape(), DType::F32);
    ops::convert(copy, t);
    return copy;
  };
  const auto f32_out = [](const Tensor& t) {
    return t.defined() && t.dtype() != DType::F32 ? Tensor::empty(t.shape(), DType::F32) : t;
  };
  const bool pre_gelu_read = epilogue == Epilogue::GeluGrad;
  const Tensor out32 = f32_out(out), pre32 = pre_gelu_read ? as_f32(pre_gelu) : f32_out(pre_gelu);
  fused_f32(out32, pre32, as_f32(a), as_f32(b), b_transposed, as_f32(bias), epilogue);
  if (out.dtype() != DType::F32) out.copy_from(out32.to_dtype(out.dtype()));
  if (pre_gelu.defined() && !pre_gelu_read && pre_gelu.dtype() != DType::F32)
    pre_gelu.copy_from(pre32.to_dtype(pre_gelu.dtype()));
}

}  // namespace lab::ch06::cpu
