// The GEMM behind the cuBLAS and cuBLASLt stand-ins: an independent CPU implementation (not the CPU
// backend's BLAS, which is the reference it is checked against).
//
//   D = act(alpha * op(A) op(B) + beta * C + bias)      for each of `batch` problems, column-major
//
// Inputs may be fp32, fp16 or bf16; products are accumulated in fp32. With `tf32`, fp32 inputs are first
// rounded to TF32 (10 mantissa bits, round to nearest-even), as tensor cores read them. beta = 0 never reads
// C (NaN there does not leak), alpha = 0 never reads A or B. A 16-bit D with a 16-bit addend (beta != 0, whose C
// has D's type, or a 16-bit bias) gets alpha * op(A) op(B) rounded to D's type first, then the addend, then the
// second rounding: on an H200 (CUDA 13.0) bf16 and fp16 products with such an addend came out 3 to 21 ulps from the
// f32 sum rounded once, and this order reproduced a failing bf16 element bit for bit. The GPU does it for some
// algorithms only (which ones is not documented); the stand-in always does, the stricter side.
//
// How: the classic blocked scheme. D is cut into tiles of kMC x kNC; a tile is one task for the worker
// pool. For each slice of kKC along k, the task packs its rows of op(A) and columns of op(B) into
// contiguous panels (converting and rounding as it goes), and a micro-kernel multiplies panels with a
// (2 x vector) x 6 block of accumulators held in registers. The tile's sums stay in a buffer of fp32 until
// the last slice, then alpha, beta * C, the bias and the activation are applied once per element.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lab::cuda::emu {

enum class Element { F32, F16, BF16 };

// A column-major operand: element (i, j) of problem b is data[b * batch_stride + i + j * ld], or
// data[b * batch_stride + j + i * ld] when `transposed` (op(X) = X^T).
struct GemmInput {
  const void* data = nullptr;
  Element type = Element::F32;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool transposed = false;
};

struct GemmOutput {
  void* data = nullptr;
  Element type = Element::F32;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// GELU: the tanh approximation. GeluGrad: the product times GELU's derivative at the aux value (cuBLASLt's DGELU,
// the backward of a GELU epilogue), which the aux matrix then gives instead of receiving.
enum class Activation { None, Relu, Gelu, GeluGrad };

struct GemmEpilogue {
  const void* bias = nullptr;  // one value per row of D, of `bias_type`; none when null
  Element bias_type = Element::F32;
  int64_t bias_batch_stride = 0;
  Activation activation = Activation::None;
  void* aux = nullptr;  // when set, receives the values before the activation (D's type); read by GeluGrad
  int64_t aux_ld = 0;
  int64_t aux_batch_stride = 0;
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  GemmInput a, b;
  const void* c = nullptr;  // D's type; may be D itself
  int64_t ldc = 0;
  int64_t c_batch_stride = 0;
  GemmOutput d;
  bool tf32 = false;
  GemmEpilogue epilogue;
};

// Runs the problem on the calling thread and the worker pool.
void run_gemm(const GemmProblem& problem);

// cuBLASLt's BGRADB epilogue beside a product of one problem: out[j] = the sum of column j of op(B) (k x n) over its
// k rows, in fp32, rows in order, stored as `out_type` (written, not added).
void column_sums_of_b(const GemmInput& b, int64_t k, int64_t n, void* out, Element out_type);

// x rounded to TF32: 10 mantissa bits, to nearest, ties to even (infinity and NaN unchanged).
float round_to_tf32(float x);

}  // namespace lab::cuda::emu
