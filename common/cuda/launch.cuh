// The one way kernels are launched in this project, so that both builds compile them:
//
//   nvcc build            kernel<<<grid, block, shared_bytes, stream>>>(args...), then the launch check
//   emulation build       (LAB_CUDA_EMULATION, see common/cuda/emulation/README.md) the same kernel, compiled
//                         by the host compiler, queued on the stream's worker thread and run block by block
//                         with one fiber per CUDA thread; the launch check is the same
//
//   LAB_LAUNCH(layernorm_forward_kernel, {grid, block, 0, stream}, out, mean, rstd, x, w, b, N, C);
//
// Each launch is also a kernel row of the step profile when one is open (kernel_timing.h).
// The launch check reports a bad configuration (grid, block, shared memory) at once, as an Error naming
// the kernel. With LAB_CUDA_SYNC_LAUNCH=1 in the environment it also waits for the kernel to finish and
// reports any fault it raised as this kernel's (slow: for hunting a fault, never for timing).
// A template kernel goes in parentheses: LAB_LAUNCH((softmax_kernel<float, 4>), config, ...).
//
// Dynamic shared memory (the launch's shared_bytes, 16-byte aligned) is declared inside the kernel with
//
//   LAB_DYNAMIC_SHARED(float, tile);    // then tile[i], as with extern __shared__ float tile[]
//
// which both builds understand (in the emulation build it points to the running block's buffer). Above
// 48 KiB a kernel needs cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)
// first, in both builds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "common/cuda/check.h"
#include "common/cuda/kernel_timing.h"

#ifdef LAB_CUDA_EMULATION
#include "common/cuda/emulation/kernel_launch.h"
#endif

namespace lab::cuda {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;  // dynamic (extern __shared__) bytes per block
  cudaStream_t stream = nullptr;
};

template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), const LaunchConfig& config, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a kernel launch passes one argument per kernel parameter");
  const KernelTiming timing(name, config.stream);  // a row of the step profile, when one is open
#ifdef LAB_CUDA_EMULATION
  emu::launch_kernel(name, kernel, config.grid, config.block, config.shared_bytes, config.stream,
                     std::forward<Args>(args)...);
#else
  // clang-format does not know CUDA's launch brackets in a .cuh file and would split them.
  // clang-format off
  kernel<<<config.grid, config.block, config.shared_bytes, config.stream>>>(std::forward<Args>(args)...);
  // clang-format on
#endif
  check_launch(name);
}

}  // namespace lab::cuda

#define LAB_LAUNCH(kernel, ...) ::lab::cuda::launch(#kernel, kernel, __VA_ARGS__)

#ifdef LAB_CUDA_EMULATION
#define LAB_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::lab::cuda::emu::device::dynamic_shared_memory())
#else
// One untyped array for every kernel of a file (nvcc rejects two extern __shared__ arrays of one name and
// different types), seen through a typed pointer.
#define LAB_DYNAMIC_SHARED(type, name)                                 \
  extern __shared__ __align__(16) unsigned char lab_dynamic_shared_[]; \
  type* const name = reinterpret_cast<type*>(lab_dynamic_shared_)
#endif
