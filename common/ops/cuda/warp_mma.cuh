// Tensor cores one instruction at a time, with every lane's share of every operand known: the PTX instructions
// mma.sync m16n8k16 (a warp computes D[16,8] = A[16,16] B[16,8] + C, 16-bit inputs, f32 accumulation) and
// ldmatrix (a warp loads four 8 x 8 tiles of 16-bit elements from shared memory into those operands). WMMA
// (flash_attention_mma.cuh) leaves its fragments' layout unspecified; here it is the PTX ISA's, so a kernel can
// keep a product in registers and still know the (row, column) of each value it holds: mask it, take row
// maxima with two shuffles, rescale rows, and turn an f32 result into the 16-bit A operand of the next product.
//
// Layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), for lane = 4 g + t (g = lane / 4, t = lane % 4); the
// 16-bit elements x0, x1 of a 32-bit register are its low and high halves:
//   A [16, 16], a[4] (8 elements):  a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                                   a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   B [16, 8],  b[2] (4 elements):  b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C, D [16, 8], f32 c[4]:         c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
// So the C fragments of two adjacent n8 tiles (columns 0-7 and 8-15) hold, rounded to 16 bits and packed in
// pairs, exactly the A fragment of one k16 step: a[0] = {c0, c1} of tile 0, a[1] = {c2, c3} of tile 0,
// a[2] = {c0, c1} of tile 1, a[3] = {c2, c3} of tile 1.
//
// ldmatrix .x4 (PTX ISA, "ldmatrix"): lanes 8i .. 8i+7 give the addresses of rows 0..7 of 8 x 8 matrix i (each
// row 8 contiguous 16-bit elements, 16-byte aligned); register r[i] of a lane receives row lane / 4, elements
// 2 (lane % 4) and 2 (lane % 4) + 1 of matrix i; with .trans, elements [2 (lane % 4)][lane / 4] and
// [2 (lane % 4) + 1][lane / 4] (the transposed matrix). Which rows each lane names for an A operand or a pair of
// B operands: a_row/a_col and bt_row/bt_col below.
//
// Under LAB_CUDA_EMULATION each is one warp task of the block executor (device_functions.h): every lane arrives
// with its operands, as on a GPU all 32 must, and the last to arrive moves the elements between the lanes'
// registers following the layouts above to the letter (a layout bug fails the tests there as it would on a
// GPU). The emulated mma sums the 16 products of each output in k order with an f32 FMA each (products of
// 16-bit values are exact in f32). On a GPU the hardware's order of additions differs, so results agree to f32
// rounding, not bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace lab::ops::cuda::mma {

// ---------------------------------------------------------------- 16-bit elements in 32-bit registers

__device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ inline float to_float(__half v) {
  return __half2float(v);
}
template <typename E>
__device__ inline E from_float(float v) {
  if constexpr (std::is_same_v<E, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return __float2half_rn(v);
}

// Two floats rounded to E, `lo` in the low half: one register of an A or B fragment.
template <typename E>
__device__ inline uint32_t pack(float lo, float hi) {
  const E pair[2] = {from_float<E>(lo), from_float<E>(hi)};
  uint32_t bits;
  memcpy(&bits, pair, sizeof(bits));
  return bits;
}

// The low (half = 0) or high (half = 1) element of a register, as a float.
template <typename E>
__device__ inline float unpack(uint32_t bits, int half) {
  E pair[2];
  memcpy(pair, &bits, sizeof(bits));
  return to_float(pair[half]);
}

// ---------------------------------------------------------------- which rows a lane names for ldmatrix .x4

// The element (row, column) whose address lane gives, for a 16 x 16 block at (row0, col0) of a row-major tile:
// matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). Loaded plainly, that is the A fragment
// of the block; loaded with .trans from a tile whose rows are k (V: [keys, dims]), registers {0, 1} are the B
// fragment of columns col0 .. col0+7 and {2, 3} that of col0+8 .. col0+15.
__device__ inline int a_row(int lane) {
  return lane % 16;
}
__device__ inline int a_col(int lane) {
  return (lane / 16) * 8;
}
// For a tile whose rows are B's n (K: [keys, dims], B[k][n] = K[n][k]), loaded plainly: matrices (n 0-7, k 0-7),
// (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15); registers {0, 1} are the B fragment of n0 .. n0+7,
// {2, 3} that of n0+8 .. n0+15.
__device__ inline int bt_row(int lane) {
  return (lane / 16) * 8 + lane % 8;
}
__device__ inline int bt_col(int lane) {
  return ((lane / 8) % 2) * 8;
}

#ifdef LAB_CUDA_EMULATION

// ---------------------------------------------------------------- emulation: the layouts by shuffles

namespace detail {

inline constexpr unsigned int kAllLanes = 0xffffffffu;

inline uint16_t element_at(const unsigned char* row, int index) {
  uint16_t v;
  memcpy(&v, row + 2 * index, sizeof(v));
  return v;
}

// What one lane brings to ldmatrix: the row address it names, and its destination registers.
struct LdmatrixLane {
  const unsigned char* row;
  uint32_t* r;
};

// Every lane's registers from the rows the lanes name, by the layout at the top: lanes 8i .. 8i+7 name the rows
// of matrix i. All are read before any is written.
template <int kMatrices, bool kTrans>
void ldmatrix_task(void* const* lanes, unsigned int /*mask*/) {
  const auto row_of = [&](int lane) { return static_cast<const LdmatrixLane*>(lanes[lane])->row; };
  uint32_t r[warpSize][kMatrices];
  for (int lane = 0; lane < warpSize; ++lane) {
    for (int i = 0; i < kMatrices; ++i) {
      if (!kTrans) {
        const unsigned char* row = row_of(8 * i + lane / 4);
        r[lane][i] = element_at(row, 2 * (lane % 4)) | static_cast<uint32_t>(element_at(row, 2 * (lane % 4) + 1)) << 16;
      } else {
        const unsigned char* row0 = row_of(8 * i + 2 * (lane % 4));
        const unsigned char* row1 = row_of(8 * i + 2 * (lane % 4) + 1);
        r[lane][i] = element_at(row0, lane / 4) | static_cast<uint32_t>(element_at(row1, lane / 4)) << 16;
      }
    }
  }
  for (int lane = 0; lane < warpSize; ++lane)
    memcpy(static_cast<const LdmatrixLane*>(lanes[lane])->r, r[lane], sizeof(r[lane]));
}

template <int kMatrices, bool kTrans>
inline void ldmatrix(uint32_t* r, const void* shared_row) {
  LdmatrixLane lane{static_cast<const unsigned char*>(shared_row), r};
  lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::Ldmatrix, kAllLanes, &lane,
                                    &ldmatrix_task<kMatrices, kTrans>);
}

// What one lane brings to mma.sync: its fragments of A, B and C, and where its part of D goes (which may be C).
struct MmaLane {
  float* d;
  const uint32_t* a;
  const uint32_t* b;
  const float* c;
};

// D = A B + C for the whole warp: A, B and C gathered from every lane's registers by the layouts at the top,
// each output summed in k order with one f32 FMA per product, D scattered back the same way.
template <typename E>
void mma_task(void* const* lanes, unsigned int /*mask*/) {
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < warpSize; ++lane) {
    const MmaLane& in = *static_cast<const MmaLane*>(lanes[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      a[g][2 * t + h] = unpack<E>(in.a[0], h);
      a[g + 8][2 * t + h] = unpack<E>(in.a[1], h);
      a[g][2 * t + 8 + h] = unpack<E>(in.a[2], h);
      a[g + 8][2 * t + 8 + h] = unpack<E>(in.a[3], h);
      b[2 * t + h][g] = unpack<E>(in.b[0], h);
      b[2 * t + 8 + h][g] = unpack<E>(in.b[1], h);
      c[g][2 * t + h] = in.c[h];
      c[g + 8][2 * t + h] = in.c[2 + h];
    }
  }
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 8; ++col) {
      float acc = c[row][col];
      for (int k = 0; k < 16; ++k) acc = fmaf(a[row][k], b[k][col], acc);
      c[row][col] = acc;
    }
  }
  for (int lane = 0; lane < warpSize; ++lane) {
    float* d = static_cast<const MmaLane*>(lanes[lane])->d;
    const int g = lane / 4, t = lane % 4;
    d[0] = c[g][2 * t];
    d[1] = c[g][2 * t + 1];
    d[2] = c[g + 8][2 * t];
    d[3] = c[g + 8][2 * t + 1];
  }
}

template <typename E>
inline void mma(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  MmaLane lane{d, a, b, c};
  lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::MmaSync, kAllLanes, &lane, &mma_task<E>);
}

}  // namespace detail

__device__ inline void ldmatrix_x4(uint32_t r[4], const void* shared_row) {
  detail::ldmatrix<4, false>(r, shared_row);
}
__device__ inline void ldmatrix_x4_trans(uint32_t r[4], const void* shared_row) {
  detail::ldmatrix<4, true>(r, shared_row);
}
template <typename E>
__device__ inline void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  detail::mma<E>(d, a, b, c);
}

#else

// ---------------------------------------------------------------- nvcc: the PTX instructions

__device__ inline void ldmatrix_x4(uint32_t r[4], const void* shared_row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(shared_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ inline void ldmatrix_x4_trans(uint32_t r[4], const void* shared_row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(shared_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

template <typename E>
__device__ inline void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  } else {
    static_assert(std::is_same_v<E, __half>, "mma_m16n8k16 takes bf16 or f16 inputs");
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  }
}

#endif

// d += A B, the accumulator in place.
template <typename E>
__device__ inline void mma_accumulate(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  mma_m16n8k16<E>(d, a, b, d);
}

}  // namespace lab::ops::cuda::mma
