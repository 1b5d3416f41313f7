// Stand-in for the device side of the CUDA toolkit (LAB_CUDA_EMULATION): the built-in index variables, the
// block barrier, the warp collectives and the memory fences, as the emulator's block executor provides them
// (common/cuda/emulation/block_executor.cpp explains how).
//
// Every CUDA thread of a block runs as a fiber on one OS worker thread, so the built-in variables are
// thread_local variables of that worker which the executor sets before it resumes a fiber: a debugger shows
// the running CUDA thread's values with `print threadIdx`.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "vector_types.h"

// initial-exec: the variables live in the executable's static TLS block, so reading one is a single load
// even from position-independent code (the default model would call __tls_get_addr on every access).
// constinit: their initialisation is constant, so no TLS wrapper function is called on each access (whose
// result UBSan would check for null through flags that the linker's TLS relaxation no longer sets).
#define LAB_EMU_BUILTIN extern thread_local constinit __attribute__((tls_model("initial-exec")))
LAB_EMU_BUILTIN uint3 threadIdx;
LAB_EMU_BUILTIN uint3 blockIdx;
LAB_EMU_BUILTIN dim3 blockDim;
LAB_EMU_BUILTIN dim3 gridDim;
#undef LAB_EMU_BUILTIN
inline constexpr int warpSize = 32;

namespace lab::cuda::emu::device {

// The warp collectives, one rendezvous each (see block_executor.cpp). From WmmaLoad on they are warp tasks
// (below): WMMA's functions (mma.h), the PTX instructions mma.sync and ldmatrix as
// common/ops/cuda/warp_mma.cuh emulates them, and wgmma's wait as common/ops/cuda/warpgroup_mma.cuh does.
enum class WarpOp : int {
  Sync,
  Shfl,
  ShflUp,
  ShflDown,
  ShflXor,
  Ballot,
  Any,
  All,
  WmmaLoad,
  WmmaStore,
  WmmaMma,
  MmaSync,
  Ldmatrix,
  Wgmma
};

// Waits until every lane of `mask` has called the same collective with the same mask, then returns this
// lane's result: the value read from the source lane (shuffles, where `arg` is the source lane, delta or
// xor mask within segments of `width` lanes), or the vote over the lanes' `value`s (ballot, any, all).
uint64_t warp_collective(WarpOp op, unsigned int mask, uint64_t value, int arg, int width);
// A warp task: a collective whose work is done once for the whole warp, by the last lane to arrive, before
// any lane of `mask` continues (the WMMA stand-in, mma.h, moves fragments between lanes this way). Each lane
// passes `lane_data` (its arguments and its part of the data); `task` then gets every lane's, lanes[l] for
// lane l (null outside the mask). It may throw: the block then faults with the exception's message.
using WarpTask = void (*)(void* const* lanes, unsigned int mask);
void warp_task(WarpOp op, unsigned int mask, void* lane_data, WarpTask task);
void sync_threads();
unsigned int active_mask();
void* dynamic_shared_memory();  // this block's dynamic shared memory (the launch's shared_bytes)
size_t dynamic_shared_bytes();  // its size
// Asynchronous copies into shared memory, per CUDA thread (cuda_pipeline_primitives.h's stand-in).
void async_copy(void* dst_shared, const void* src_global, size_t bytes, size_t zfill);
void async_commit();
void async_wait_prior(size_t prior);

template <typename T>
uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "a warp shuffle moves a value of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

template <typename T>
T shuffle(WarpOp op, unsigned int mask, T value, int arg, int width) {
  return from_bits<T>(warp_collective(op, mask, to_bits(value), arg, width));
}

}  // namespace lab::cuda::emu::device

// ---------------------------------------------------------------- barrier and fences

inline void __syncthreads() {
  lab::cuda::emu::device::sync_threads();
}

// Blocks run in parallel on several OS threads: a fence is a real fence.
inline void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence_system() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// ---------------------------------------------------------------- warp collectives

template <typename T>
T __shfl_sync(unsigned int mask, T var, int src_lane, int width = warpSize) {
  using lab::cuda::emu::device::WarpOp;
  return lab::cuda::emu::device::shuffle(WarpOp::Shfl, mask, var, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize) {
  using lab::cuda::emu::device::WarpOp;
  return lab::cuda::emu::device::shuffle(WarpOp::ShflUp, mask, var, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize) {
  using lab::cuda::emu::device::WarpOp;
  return lab::cuda::emu::device::shuffle(WarpOp::ShflDown, mask, var, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = warpSize) {
  using lab::cuda::emu::device::WarpOp;
  return lab::cuda::emu::device::shuffle(WarpOp::ShflXor, mask, var, lane_mask, width);
}

inline unsigned int __ballot_sync(unsigned int mask, int predicate) {
  using lab::cuda::emu::device::WarpOp;
  return static_cast<unsigned int>(
      lab::cuda::emu::device::warp_collective(WarpOp::Ballot, mask, predicate != 0, 0, warpSize));
}
inline int __any_sync(unsigned int mask, int predicate) {
  using lab::cuda::emu::device::WarpOp;
  return static_cast<int>(lab::cuda::emu::device::warp_collective(WarpOp::Any, mask, predicate != 0, 0, warpSize));
}
inline int __all_sync(unsigned int mask, int predicate) {
  using lab::cuda::emu::device::WarpOp;
  return static_cast<int>(lab::cuda::emu::device::warp_collective(WarpOp::All, mask, predicate != 0, 0, warpSize));
}
inline void __syncwarp(unsigned int mask = 0xffffffffu) {
  using lab::cuda::emu::device::WarpOp;
  lab::cuda::emu::device::warp_collective(WarpOp::Sync, mask, 0, 0, warpSize);
}
// The lanes of this warp that have not exited (the emulator cannot see divergence inside a warp).
inline unsigned int __activemask() {
  return lab::cuda::emu::device::active_mask();
}
