// Stand-in for the CUDA toolkit's vector_types.h (LAB_CUDA_EMULATION): dim3 and the built-in vector types
// (int2, float4, ...) with CUDA's sizes and alignments, and their make_* constructors.
#pragma once

#include <cstddef>

// One family of vector types: T1 .. T4. As in CUDA, the 2- and 4-element types are aligned to their size (at
// most 16 bytes) so that a float4 load is one 16-byte access; the 3-element types have the element's alignment.
#define LAB_EMU_VECTOR_FAMILY(T, name)                              \
  struct alignas(sizeof(T)) name##1 {                               \
    T x;                                                            \
  };                                                                \
  struct alignas(2 * sizeof(T) < 16 ? 2 * sizeof(T) : 16) name##2 { \
    T x, y;                                                         \
  };                                                                \
  struct name##3 {                                                  \
    T x, y, z;                                                      \
  };                                                                \
  struct alignas(4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16) name##4 { \
    T x, y, z, w;                                                   \
  };                                                                \
  inline constexpr name##1 make_##name##1(T x) {                    \
    return name##1 {x};                                             \
  }                                                                 \
  inline constexpr name##2 make_##name##2(T x, T y) {               \
    return name##2 {x, y};                                          \
  }                                                                 \
  inline constexpr name##3 make_##name##3(T x, T y, T z) {          \
    return name##3 {x, y, z};                                       \
  }                                                                 \
  inline constexpr name##4 make_##name##4(T x, T y, T z, T w) {     \
    return name##4 {x, y, z, w};                                    \
  }

LAB_EMU_VECTOR_FAMILY(signed char, char)
LAB_EMU_VECTOR_FAMILY(unsigned char, uchar)
LAB_EMU_VECTOR_FAMILY(short, short)
LAB_EMU_VECTOR_FAMILY(unsigned short, ushort)
LAB_EMU_VECTOR_FAMILY(int, int)
LAB_EMU_VECTOR_FAMILY(unsigned int, uint)
LAB_EMU_VECTOR_FAMILY(long, long)
LAB_EMU_VECTOR_FAMILY(unsigned long, ulong)
LAB_EMU_VECTOR_FAMILY(long long, longlong)
LAB_EMU_VECTOR_FAMILY(unsigned long long, ulonglong)
LAB_EMU_VECTOR_FAMILY(float, float)
LAB_EMU_VECTOR_FAMILY(double, double)

#undef LAB_EMU_VECTOR_FAMILY

// The shape of a grid or a block: unspecified dimensions are 1.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
