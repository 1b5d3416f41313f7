#include "common/cuda/emulation/gemm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/cuda/emulation/worker_pool.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"

namespace lab::cuda::emu {

namespace {

// A vector of floats as wide as the machine's widest (GCC vector extension; FMA contraction is enabled
// for this file in CMake, so acc += a * b is one fused multiply-add).
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

constexpr int kMR = 2 * kLanes;  // rows of a micro-tile: two vectors
constexpr int kNR = 6;           // columns of a micro-tile
constexpr int64_t kMC = 128;     // rows of a task's tile
constexpr int64_t kNC = 192;     // columns of a task's tile
constexpr int64_t kKC = 256;     // depth of one packed slice
static_assert(kMC % kMR == 0 && kNC % kNR == 0);

float load(const void* data, Element type, int64_t index) {
  switch (type) {
    case Element::F32: return static_cast<const float*>(data)[index];
    case Element::F16: return half_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case Element::BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
  }
  return 0.0f;
}

float round_to(Element type, float value) {
  switch (type) {
    case Element::F32: return value;
    case Element::F16: return half_bits_to_float(float_to_half_bits(value));
    case Element::BF16: return bf16_bits_to_float(float_to_bf16_bits(value));
  }
  return value;
}

void store(void* data, Element type, int64_t index, float value) {
  switch (type) {
    case Element::F32: static_cast<float*>(data)[index] = value; break;
    case Element::F16: static_cast<uint16_t*>(data)[index] = float_to_half_bits(value); break;
    case Element::BF16: static_cast<uint16_t*>(data)[index] = float_to_bf16_bits(value); break;
  }
}

size_t element_bytes(Element type) {
  return type == Element::F32 ? 4 : 2;
}

const void* offset(const void* data, Element type, int64_t elements) {
  return static_cast<const std::byte*>(data) + elements * static_cast<int64_t>(element_bytes(type));
}

// How each element type reads as float.
struct AsF32 {
  static float get(float v) { return v; }
};
struct AsF16 {
  static float get(uint16_t v) { return half_bits_to_float(v); }
};
struct AsBF16 {
  static float get(uint16_t v) { return bf16_bits_to_float(v); }
};

// To nearest at bit 13, ties to even; infinity and NaN unchanged (see round_to_tf32).
inline float tf32(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;
  bits += 0x0fffu + ((bits >> 13) & 1u);
  return std::bit_cast<float>(bits & ~0x1fffu);
}

// Packs a block of an operand into panels of W along one dimension q (rows of op(A), columns of op(B)):
// element (q, p) of the block is x[q * q_stride + p * p_stride], and goes to out[(q / W * depth + p) * W +
// q % W]. Past `count` the panel is padded with zeros; with kTf32 every value is rounded to TF32. The
// panel is written in order (a strided read costs less here than strided writes into it).
template <int W, typename As, bool kTf32, typename T>
void pack(const T* x, int64_t q_stride, int64_t p_stride, int64_t count, int64_t depth, float* out) {
  for (int64_t q0 = 0; q0 < count; q0 += W) {
    float* panel = out + q0 * depth;
    const int64_t valid = std::min<int64_t>(W, count - q0);
    const T* first = x + q0 * q_stride;
    for (int64_t p = 0; p < depth; ++p) {
      float* slot = panel + p * W;
      const T* column = first + p * p_stride;
      for (int64_t w = 0; w < valid; ++w) {
        const float v = As::get(column[w * q_stride]);
        slot[w] = kTf32 ? tf32(v) : v;
      }
      for (int64_t w = valid; w < W; ++w) slot[w] = 0.0f;
    }
  }
}

// The same for an operand of any element type: (q0, p0) is the block's first element. TF32 applies to fp32
// inputs only (16-bit inputs already have fewer mantissa bits).
template <int W>
void pack_operand(const GemmInput& x, const void* base, int64_t q0, int64_t count, int64_t p0, int64_t depth,
                  int64_t q_stride, int64_t p_stride, bool tf32, float* out) {
  const int64_t first = q0 * q_stride + p0 * p_stride;
  switch (x.type) {
    case Element::F32: {
      const float* data = static_cast<const float*>(base) + first;
      if (tf32)
        pack<W, AsF32, true>(data, q_stride, p_stride, count, depth, out);
      else
        pack<W, AsF32, false>(data, q_stride, p_stride, count, depth, out);
      break;
    }
    case Element::F16:
      pack<W, AsF16, false>(static_cast<const uint16_t*>(base) + first, q_stride, p_stride, count, depth, out);
      break;
    case Element::BF16:
      pack<W, AsBF16, false>(static_cast<const uint16_t*>(base) + first, q_stride, p_stride, count, depth, out);
      break;
  }
}

// Rows [i0, i0 + rows) of op(A) over depth [p0, p0 + depth): op(A)(i, p) is A[i + p * ld], or A[p + i * ld].
void pack_a(const GemmInput& a, const void* base, int64_t i0, int64_t rows, int64_t p0, int64_t depth, bool tf32,
            float* out) {
  const int64_t q_stride = a.transposed ? a.ld : 1, p_stride = a.transposed ? 1 : a.ld;
  pack_operand<kMR>(a, base, i0, rows, p0, depth, q_stride, p_stride, tf32, out);
}

// Columns [j0, j0 + cols) of op(B) over depth [p0, p0 + depth): op(B)(p, j) is B[p + j * ld], or B[j + p * ld].
void pack_b(const GemmInput& b, const void* base, int64_t p0, int64_t depth, int64_t j0, int64_t cols, bool tf32,
            float* out) {
  const int64_t q_stride = b.transposed ? 1 : b.ld, p_stride = b.transposed ? b.ld : 1;
  pack_operand<kNR>(b, base, j0, cols, p0, depth, q_stride, p_stride, tf32, out);
}

// tile[kMR x kNR] (leading dimension ld) += A panel x B panel over `depth`.
void micro_kernel(int64_t depth, const float* a, const float* b, float* tile, int64_t ld) {
  Vec acc[kNR][2] = {};
  for (int64_t p = 0; p < depth; ++p) {
    Vec a0, a1;
    std::memcpy(&a0, a + p * kMR, sizeof a0);
    std::memcpy(&a1, a + p * kMR + kLanes, sizeof a1);
    const float* bp = b + p * kNR;
#pragma GCC unroll 6
    for (int c = 0; c < kNR; ++c) {
      acc[c][0] += a0 * bp[c];
      acc[c][1] += a1 * bp[c];
    }
  }
  for (int c = 0; c < kNR; ++c) {
    for (int h = 0; h < 2; ++h) {
      Vec t;
      std::memcpy(&t, tile + c * ld + h * kLanes, sizeof t);
      t += acc[c][h];
      std::memcpy(tile + c * ld + h * kLanes, &t, sizeof t);
    }
  }
}

// cuBLASLt documents its GELU epilogues by name only, and its results are not the tanh formula's to the last bit:
// on an H100 (CUDA 13.0) its GELU differed from it by up to 3.7e-6 of the output's scale. The stand-in computes
// the tanh formula and keeps 18 fractional bits of the tanh (an error of up to 2^-19, the same order), so code
// that expects an epilogue to match another GELU (or its derivative) exactly fails here too.
constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluCubic = 0.044715f;

float coarse_gelu_tanh(float x) {
  constexpr float kTanhStep = 0x1p-18f;
  return std::nearbyint(std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)) / kTanhStep) * kTanhStep;
}

float activate(Activation activation, float x) {
  switch (activation) {
    case Activation::None: return x;
    case Activation::Relu: return x > 0.0f ? x : 0.0f;
    case Activation::Gelu: return 0.5f * x * (1.0f + coarse_gelu_tanh(x));
    case Activation::GeluGrad: return x;  // applied beforehand: the derivative needs the aux value
  }
  return x;
}

// d gelu(x) / dx for the tanh approximation: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
float gelu_derivative(float x) {
  const float t = coarse_gelu_tanh(x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

// Per OS thread, reused from task to task.
struct Scratch {
  std::vector<float> a, b, tile;
};

// One task: the tile of D at rows [i0, i0 + rows), columns [j0, j0 + cols) of problem `batch`.
void run_tile(const GemmProblem& p, int64_t batch, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  thread_local Scratch s;
  const int64_t ld = (rows + kMR - 1) / kMR * kMR;  // the tile buffer's leading dimension
  const int64_t padded_cols = (cols + kNR - 1) / kNR * kNR;
  s.tile.assign(static_cast<size_t>(ld * padded_cols), 0.0f);
  if (p.alpha != 0.0f) {
    const void* a = offset(p.a.data, p.a.type, batch * p.a.batch_stride);
    const void* b = offset(p.b.data, p.b.type, batch * p.b.batch_stride);
    s.a.resize(static_cast<size_t>(ld * kKC));
    s.b.resize(static_cast<size_t>(padded_cols * kKC));
    for (int64_t p0 = 0; p0 < p.k; p0 += kKC) {
      const int64_t depth = std::min(kKC, p.k - p0);
      pack_a(p.a, a, i0, rows, p0, depth, p.tf32, s.a.data());
      pack_b(p.b, b, p0, depth, j0, cols, p.tf32, s.b.data());
      for (int64_t c0 = 0; c0 < cols; c0 += kNR)
        for (int64_t r0 = 0; r0 < rows; r0 += kMR)
          micro_kernel(depth, s.a.data() + r0 * depth, s.b.data() + c0 * depth, s.tile.data() + r0 + c0 * ld, ld);
    }
  }
  const GemmEpilogue& e = p.epilogue;
  const Element type = p.d.type;
  void* const d = const_cast<void*>(offset(p.d.data, type, batch * p.d.batch_stride));
  const void* const c = p.beta != 0.0f ? offset(p.c, type, batch * p.c_batch_stride) : nullptr;
  const void* const bias = e.bias ? offset(e.bias, e.bias_type, batch * e.bias_batch_stride) : nullptr;
  void* const aux = e.aux ? const_cast<void*>(offset(e.aux, type, batch * e.aux_batch_stride)) : nullptr;
  // A 16-bit D with a 16-bit addend (C, or the bias): the product is rounded to D's type before the addend joins
  // it, as an H200 did for some algorithms (gemm.h).
  const bool product_rounded = type != Element::F32 && (c || (bias && e.bias_type != Element::F32));
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = i0 + i, col = j0 + j;
      float v = p.alpha * s.tile[static_cast<size_t>(i + j * ld)];
      if (product_rounded) v = round_to(type, v);
      if (c) v += p.beta * load(c, type, row + col * p.ldc);
      if (bias) v += load(bias, e.bias_type, row);
      if (e.activation == Activation::GeluGrad)
        v *= gelu_derivative(load(aux, type, row + col * e.aux_ld));
      else if (aux)
        store(aux, type, row + col * e.aux_ld, v);
      store(d, type, row + col * p.d.ld, activate(e.activation, v));
    }
  }
}

}  // namespace

void column_sums_of_b(const GemmInput& b, int64_t k, int64_t n, void* out, Element out_type) {
  for (int64_t j = 0; j < n; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) sum += load(b.data, b.type, b.transposed ? j + i * b.ld : i + j * b.ld);
    store(out, out_type, j, sum);
  }
}

float round_to_tf32(float x) {
  return tf32(x);
}

void run_gemm(const GemmProblem& p) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  const int64_t tiles_m = (p.m + kMC - 1) / kMC;
  const int64_t tiles_n = (p.n + kNC - 1) / kNC;
  const int64_t per_batch = tiles_m * tiles_n;
  run_parallel(static_cast<uint64_t>(p.batch * per_batch), [&](uint64_t task) {
    const int64_t t = static_cast<int64_t>(task);
    const int64_t batch = t / per_batch, tile = t % per_batch;
    const int64_t i0 = tile % tiles_m * kMC, j0 = tile / tiles_m * kNC;
    run_tile(p, batch, i0, std::min(kMC, p.m - i0), j0, std::min(kNC, p.n - j0));
    return true;
  });
}

}  // namespace lab::cuda::emu
