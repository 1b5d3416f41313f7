// Stand-in for the CUDA toolkit's cuda_runtime.h (LAB_CUDA_EMULATION): the runtime API, the device side
// (built-in variables, barrier, warp collectives, atomics, math) and the CUDA keywords, so that a .cu file
// compiles with the host C++ compiler. How it runs: common/cuda/emulation/README.md.
#pragma once

#include <bit>
#include <cstddef>

#include "cuda_runtime_api.h"
#include "device_atomic_functions.h"
#include "device_functions.h"
#include "math_functions.h"

// ---------------------------------------------------------------- keywords
// Every function is a host function here, and a kernel an ordinary function that the executor calls once
// per CUDA thread. A static __shared__ variable is per OS worker thread: a worker runs one block at a
// time, so the fibers of that block (its CUDA threads) share it, as a block shares shared memory.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local

// ---------------------------------------------------------------- typed overloads, as in the toolkit
template <class T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return ::cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
template <class T>
cudaError_t cudaHostAlloc(T** ptr, size_t bytes, unsigned int flags) {
  return ::cudaHostAlloc(reinterpret_cast<void**>(ptr), bytes, flags);
}
template <class T>
cudaError_t cudaMallocHost(T** ptr, size_t bytes) {
  return ::cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
// The attribute of a kernel passed by name: cudaFuncSetAttribute(my_kernel, ...).
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(std::bit_cast<const void*>(entry), attr, value);
}
