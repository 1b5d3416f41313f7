// How LAB_LAUNCH (common/cuda/launch.cuh) starts a kernel in the emulation build.
//
// launch_kernel copies the arguments, converted to the kernel's parameter types, as a GPU launch does,
// and hands the launch to the runtime (launch.cpp), which
//   - checks the configuration as an sm_90 GPU does, with the same error codes: at most 1024 threads a
//     block, block dimensions up to (1024, 1024, 64), grid dimensions up to (2^31 - 1, 65535, 65535), none
//     zero (cudaErrorInvalidConfiguration); dynamic shared memory up to 48 KiB, or up to what
//     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n) allowed, n <= 227 KiB
//     (cudaErrorInvalidValue); a bad stream handle (cudaErrorInvalidResourceHandle). These become the
//     calling thread's last error, which LAB_LAUNCH's check_launch reports with the kernel's name;
//   - checks every pointer argument: null, or inside (or one past the end of) device memory or pinned host
//     memory. Anything else is a host pointer the GPU could not read: the device faults
//     (cudaErrorIllegalAddress, sticky) with a message naming the kernel and the argument;
//   - queues the grid on the stream. When its turn comes, the blocks run on the worker threads, each CUDA
//     thread as a fiber (block_executor.h). A misused barrier or warp collective faults the device
//     (cudaErrorLaunchFailure, sticky) with a message naming the kernel, the block and the thread.
#pragma once

#include <cuda_runtime.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace lab::cuda::emu {

// A pointer argument of a launch: its position in the kernel's parameter list, and its value.
struct PointerArgument {
  int index;
  uintptr_t address;
};

// A launch, with the kernel and its arguments behind a type-erased runner.
struct LaunchRequest {
  const char* kernel_name;
  const void* kernel;  // the kernel's address: the key of cudaFuncSetAttribute
  dim3 grid;
  dim3 block;
  size_t shared_bytes;
  cudaStream_t stream;
  std::vector<PointerArgument> pointers;
  void (*run_thread)(const void* bound);
  std::shared_ptr<const void> bound;
};

// Checks the launch and queues it (see above).
void submit_launch(LaunchRequest request);

// A kernel with a copy of its arguments; run_thread calls it once for the current CUDA thread.
template <typename... Params>
struct BoundKernel {
  void (*kernel)(Params...);
  std::tuple<std::remove_cvref_t<Params>...> args;

  static void run_thread(const void* self) {
    const auto& bound = *static_cast<const BoundKernel*>(self);
    std::apply(bound.kernel, bound.args);
  }
};

template <typename T>
constexpr bool kIsDataPointer = std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>;

template <typename Tuple, size_t... I>
std::vector<PointerArgument> pointer_arguments(const Tuple& args, std::index_sequence<I...>) {
  std::vector<PointerArgument> pointers;
  (
      [&] {
        using T = std::tuple_element_t<I, Tuple>;
        if constexpr (kIsDataPointer<T>)
          pointers.push_back({static_cast<int>(I), reinterpret_cast<uintptr_t>(std::get<I>(args))});
      }(),
      ...);
  return pointers;
}

template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  auto bound = std::make_shared<BoundKernel<Params...>>(
      BoundKernel<Params...>{kernel, std::tuple<std::remove_cvref_t<Params>...>(std::forward<Args>(args)...)});
  std::vector<PointerArgument> pointers = pointer_arguments(bound->args, std::index_sequence_for<Params...>{});
  submit_launch(LaunchRequest{name, std::bit_cast<const void*>(kernel), grid, block, shared_bytes, stream,
                              std::move(pointers), &BoundKernel<Params...>::run_thread, std::move(bound)});
}

}  // namespace lab::cuda::emu
