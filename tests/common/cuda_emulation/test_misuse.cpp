// Misuse of barriers and warp collectives, and host pointers passed to kernels: each is a sticky fault of
// the device (as on a GPU) whose description names the kernel, the block and the thread, is printed to
// stderr, and is cleared by cudaDeviceReset.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

constexpr unsigned kFull = 0xffffffffu;

using Misuse = EmulationTest;

// ---------------------------------------------------------------- barriers

__global__ void early_return_kernel(int* out) {
  if (threadIdx.x == 5) return;  // the classic bug: a thread leaves before the block's barrier
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST_F(Misuse, ABarrierAfterAThreadExitedIsAFault) {
  DeviceBuffer<int> out(64);
  launch_faulting("early_return_kernel", early_return_kernel, 2, 64, out.get());
  const std::string fault = expect_fault(
      cudaErrorLaunchFailure, {"kernel early_return_kernel", "block (", "thread (", "__syncthreads", "exited"});
  EXPECT_NE(fault.find("(5,0,0)"), std::string::npos) << fault;  // the thread that left
}

__global__ void barrier_in_a_shuffle_kernel(int* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane == 7) __syncthreads();  // lane 7 waits for the block, the rest of its warp for lane 7
  out[threadIdx.x] = __shfl_xor_sync(kFull, static_cast<int>(lane), 1);
}

TEST_F(Misuse, ADeadlockBetweenABarrierAndAShuffleIsAFault) {
  DeviceBuffer<int> out(32);
  launch_faulting("barrier_in_a_shuffle_kernel", barrier_in_a_shuffle_kernel, 1, 32, out.get());
  expect_fault(cudaErrorLaunchFailure, {"kernel barrier_in_a_shuffle_kernel", "block (0,0,0)", "__shfl_xor_sync",
                                        "waits for lane 7", "(7,0,0)", "waits at __syncthreads"});
}

// ---------------------------------------------------------------- warp collectives

__global__ void mask_omits_caller_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, static_cast<int>(threadIdx.x), 0);
}

TEST_F(Misuse, AMaskThatOmitsTheCallingLaneIsAFault) {
  DeviceBuffer<int> out(32);
  launch_faulting("mask_omits_caller_kernel", mask_omits_caller_kernel, 1, 32, out.get());
  const std::string fault =
      expect_fault(cudaErrorLaunchFailure,
                   {"kernel mask_omits_caller_kernel", "__shfl_sync(mask 0x00000001)", "omits the calling lane"});
  EXPECT_EQ(fault.find("thread (0,0,0)"), std::string::npos) << "lane 0 is in the mask: " << fault;
}

__global__ void full_mask_in_partial_warp_kernel(int* out) {
  out[threadIdx.x] = __shfl_down_sync(kFull, static_cast<int>(threadIdx.x), 1);
}

TEST_F(Misuse, AMaskWithALaneThatDoesNotExistIsAFault) {
  DeviceBuffer<int> out(48);  // 48 threads: the second warp has 16 lanes
  launch_faulting("full_mask_in_partial_warp_kernel", full_mask_in_partial_warp_kernel, 1, 48, out.get());
  expect_fault(cudaErrorLaunchFailure, {"kernel full_mask_in_partial_warp_kernel", "thread (",
                                        "includes lane 16, which does not exist", "48 threads", "warp 1 has 16 lanes"});
}

__global__ void exited_lane_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(kFull, static_cast<int>(threadIdx.x), 1);
}

TEST_F(Misuse, AMaskWithALaneThatExitedIsAFault) {
  DeviceBuffer<int> out(32);
  launch_faulting("exited_lane_kernel", exited_lane_kernel, 1, 32, out.get());
  expect_fault(cudaErrorLaunchFailure, {"kernel exited_lane_kernel", "__shfl_xor_sync(mask 0xffffffff)", "exited"});
}

__global__ void source_outside_mask_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 20);
}

TEST_F(Misuse, ReadingALaneOutsideTheMaskIsAFault) {
  DeviceBuffer<int> out(32);
  launch_faulting("source_outside_mask_kernel", source_outside_mask_kernel, 1, 32, out.get());
  expect_fault(cudaErrorLaunchFailure, {"kernel source_outside_mask_kernel", "__shfl_sync(mask 0x0000ffff)",
                                        "reads lane 20", "not in the mask"});
}

__global__ void mixed_collectives_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane % 2 == 0)
    out[lane] = static_cast<int>(__ballot_sync(kFull, 1));
  else
    out[lane] = __shfl_xor_sync(kFull, lane, 1);
}

TEST_F(Misuse, DifferentCollectivesUnderOneMaskAreAFault) {
  DeviceBuffer<int> out(32);
  launch_faulting("mixed_collectives_kernel", mixed_collectives_kernel, 1, 32, out.get());
  expect_fault(cudaErrorLaunchFailure,
               {"kernel mixed_collectives_kernel", "__ballot_sync", "__shfl_xor_sync", "same collective"});
}

__global__ void bad_width_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(kFull, static_cast<int>(threadIdx.x), 0, 3);
}

TEST_F(Misuse, AShuffleWidthThatIsNotAPowerOfTwoIsAFault) {
  DeviceBuffer<int> out(32);
  launch_faulting("bad_width_kernel", bad_width_kernel, 1, 32, out.get());
  expect_fault(cudaErrorLaunchFailure, {"kernel bad_width_kernel", "width 3 is not a power of two"});
}

__global__ void throwing_kernel(int* /*out*/) {
  if (blockIdx.x == 1 && threadIdx.x == 3) throw std::runtime_error("boom");
}

TEST_F(Misuse, AnExceptionLeavingAThreadIsAFault) {
  DeviceBuffer<int> out(1);
  launch_faulting("throwing_kernel", throwing_kernel, 2, 8, out.get());
  expect_fault(cudaErrorLaunchFailure, {"kernel throwing_kernel", "block (1,0,0)", "thread (3,0,0)", "boom"});
}

// ---------------------------------------------------------------- pointer arguments

__global__ void write_kernel(int* out, const int* in, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in ? in[i] + 1 : -1;
}

TEST_F(Misuse, AHostPointerArgumentIsAFaultNamingTheArgument) {
  DeviceBuffer<int> out(8);
  std::vector<int> host(8, 1);
  testing::internal::CaptureStderr();
  // Found when the launch is made (a GPU would find it when the kernel reads), so the launch's own
  // check already reports it.
  launch_kernel("write_kernel", write_kernel, 1, 8, 0, nullptr, out.get(), host.data(), 8);
  ASSERT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  const std::string printed = testing::internal::GetCapturedStderr();
  const std::string fault =
      expect_fault(cudaErrorIllegalAddress, {"kernel write_kernel", "argument 1", "host pointer"});
  EXPECT_NE(printed.find(fault), std::string::npos) << "the fault is printed when it happens: " << printed;
}

TEST_F(Misuse, NullInteriorEndAndPinnedPointersAreFine) {
  DeviceBuffer<int> out(8), in(std::vector<int>(8, 41));
  PinnedBuffer<int> pinned(8);
  for (int i = 0; i < 8; ++i) pinned[i] = 10 * i;
  EXPECT_EQ(launch(write_kernel, 1, 8, 0, nullptr, out.get(), static_cast<const int*>(nullptr), 8), cudaSuccess);
  EXPECT_EQ(launch(write_kernel, 1, 8, 0, nullptr, out.get() + 4, in.get() + 2, 4), cudaSuccess);
  EXPECT_EQ(launch(write_kernel, 1, 8, 0, nullptr, out.get() + 8, in.get() + 8, 0), cudaSuccess);  // one past the end
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out.download(), (std::vector<int>{-1, -1, -1, -1, 42, 42, 42, 42}));
  EXPECT_EQ(launch(write_kernel, 1, 8, 0, nullptr, pinned.get(), pinned.get(), 8), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(pinned[7], 71);
}

// ---------------------------------------------------------------- stickiness

TEST_F(Misuse, AFaultIsStickyUntilTheDeviceIsReset) {
  DeviceBuffer<int> out(64);
  launch_faulting("early_return_kernel", early_return_kernel, 1, 64, out.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  // Every later call reports it, and cudaGetLastError does not clear it.
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorLaunchFailure);
  EXPECT_EQ(launch(write_kernel, 1, 8, 0, nullptr, out.get(), out.get(), 8), cudaErrorLaunchFailure);
  EXPECT_FALSE(last_fault().empty());

  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(last_fault().empty());
  EXPECT_EQ(launch(write_kernel, 1, 8, 0, nullptr, out.get(), static_cast<const int*>(nullptr), 8), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out.download()[0], -1);
}

}  // namespace
}  // namespace lab::cuda::emu::test
