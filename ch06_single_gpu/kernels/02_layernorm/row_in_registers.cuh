// A row of C floats held in one warp's registers, read and written with 128-bit loads and stores: the
// building block of LayerNorm v3 and of the fused residual + LayerNorm (v4).
//
// Lane l holds kChunks float4 vectors of the row; vector i covers columns [4 (32 i + l), 4 (32 i + l) + 4). One
// load instruction of the warp therefore reads 32 consecutive float4, 512 contiguous bytes (four full 128-byte
// lines), and the row costs C / 128 load instructions per lane instead of the C / 32 of scalar loads. Once
// loaded, the row stays in registers for every pass a LayerNorm makes over it (mean, variance, normalise), so
// memory sees each element once.
//
// The width is a template parameter because registers cannot be indexed at run time: the arrays must have a
// size the compiler knows, and every loop over them must unroll. launch_for_row_width() picks the narrowest
// instance that holds the row from a short ladder: 1, 2, 4 and 8 chunks, then 6, 10 and 13 so that GPT-2's
// widths (768, 1024, 1280, 1600) fit without registers held for nothing. A wider instance costs registers, not
// time: vectors past the end of the row are neither loaded nor stored. The ladder stops at 13 chunks
// (C = 1664): the backward holds four such arrays per lane (dout, xhat, and the running dweight and dbias
// sums), 241 registers at 13 chunks, and 16 chunks would pass the 255 a thread may have and spill.
//
// Requirements: C a multiple of 4 and every row 16-byte aligned (C % 4 == 0 and a 16-byte aligned base
// pointer), so that a vector is either wholly inside the row or wholly past its end.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "common/ops/cuda/reductions.cuh"

namespace lab::ch06::cuda {

using ops::cuda::kWarpSize;

inline constexpr int kVec = 4;  // floats per vector: one float4, one 128-bit access

// The ladder of instances (see above); the widest holds a row of kMaxRowColumns.
using RowChunkLadder = std::integer_sequence<int, 1, 2, 4, 6, 8, 10, 13>;
inline constexpr int64_t kMaxRowColumns = int64_t{13} * kWarpSize * kVec;  // 1664

// Whether the register-row kernels can take rows of C columns starting at these pointers.
inline bool fits_register_row(int64_t C, std::initializer_list<const void*> rows) {
  if (C <= 0 || C > kMaxRowColumns || C % kVec != 0) return false;
  for (const void* p : rows)
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % (kVec * sizeof(float)) != 0) return false;
  return true;
}

template <int kChunks>
struct RegisterRow {
  static constexpr int64_t kColumns = int64_t{kChunks} * kWarpSize * kVec;

  float v[kChunks][kVec];

  // The first column of vector i in lane `lane`.
  __device__ static int64_t column(int i, int lane) { return (static_cast<int64_t>(i) * kWarpSize + lane) * kVec; }

  __device__ void fill(float value) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i)
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[i][j] = value;
  }

  // Reads this lane's vectors of `row`; vectors past the end of the row are set to zero.
  __device__ void load(const float* row, int64_t C, int lane) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int64_t c = column(i, lane);
      const float4 q = c < C ? *reinterpret_cast<const float4*>(row + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[i][0] = q.x;
      v[i][1] = q.y;
      v[i][2] = q.z;
      v[i][3] = q.w;
    }
  }

  // this += other, element by element.
  __device__ void add(const RegisterRow& other) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i)
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[i][j] += other.v[i][j];
  }

  // row += this, for this lane's vectors that lie inside the row (each read before it is written).
  __device__ void add_into(float* row, int64_t C, int lane) const {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int64_t c = column(i, lane);
      if (c >= C) continue;
      float4* p = reinterpret_cast<float4*>(row + c);
      const float4 q = *p;
      *p = make_float4(q.x + v[i][0], q.y + v[i][1], q.z + v[i][2], q.w + v[i][3]);
    }
  }

  // Writes this lane's vectors that lie inside the row.
  __device__ void store(float* row, int64_t C, int lane) const {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int64_t c = column(i, lane);
      if (c < C) *reinterpret_cast<float4*>(row + c) = make_float4(v[i][0], v[i][1], v[i][2], v[i][3]);
    }
  }
};

// Mean and 1 / standard deviation of a row held in registers, in two passes over the registers: the mean,
// then the variance around it (E[x^2] - E[x]^2 would cancel for rows far from zero). Every lane gets both.
struct RowStatistics {
  float mean;
  float rstd;
};

template <int kChunks>
__device__ RowStatistics row_statistics(const RegisterRow<kChunks>& x, int64_t C, int lane, float eps) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) sum += x.v[i][j];  // vectors past the end hold zeros
  const float mean = ops::cuda::warp_sum(sum) / static_cast<float>(C);
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (RegisterRow<kChunks>::column(i, lane) >= C) continue;  // (0 - mean)^2 is not zero: skip the padding
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float d = x.v[i][j] - mean;
      squares += d * d;
    }
  }
  const float variance = ops::cuda::warp_sum(squares) / static_cast<float>(C);
  return {mean, rsqrtf(variance + eps)};
}

// out = (x - mean) * rstd * weight + bias, in place in the registers of x.
template <int kChunks>
__device__ void normalise_row(RegisterRow<kChunks>& x, RowStatistics s, const float* weight, const float* bias,
                              int64_t C, int lane) {
  RegisterRow<kChunks> w, b;
  w.load(weight, C, lane);
  b.load(bias, C, lane);
#pragma unroll
  for (int i = 0; i < kChunks; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) x.v[i][j] = (x.v[i][j] - s.mean) * s.rstd * w.v[i][j] + b.v[i][j];
}

// Calls launch.template operator()<kChunks>() for the narrowest instance of the ladder that holds C columns
// (C <= kMaxRowColumns; callers check fits_register_row first).
template <typename Launch, int... kChunks>
void launch_for_row_width_impl(int64_t C, Launch& launch, std::integer_sequence<int, kChunks...>) {
  // The fold stops at the first instance wide enough.
  (void)((C <= RegisterRow<kChunks>::kColumns ? (launch.template operator()<kChunks>(), true) : false) || ...);
}

template <typename Launch>
void launch_for_row_width(int64_t C, Launch&& launch) {
  launch_for_row_width_impl(C, launch, RowChunkLadder{});
}

}  // namespace lab::ch06::cuda
