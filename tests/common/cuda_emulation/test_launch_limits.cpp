// Launch configurations checked as an sm_90 GPU checks them, with its error codes: these are the calling
// thread's last error (not sticky), and nothing runs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

__global__ void count_kernel(int* runs) {
  atomicAdd(runs, 1);
}

class LaunchLimits : public EmulationTest {
 protected:
  // The launch's error code; `ran` says whether any thread ran.
  cudaError_t try_launch(dim3 grid, dim3 block, size_t shared = 0, bool* ran = nullptr) {
    const cudaError_t error = launch(count_kernel, grid, block, shared, nullptr, runs_.get());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const int count = runs_.download()[0];
    if (ran) *ran = count > 0;
    runs_.upload({0});
    return error;
  }
  DeviceBuffer<int> runs_{std::vector<int>{0}};
};

TEST_F(LaunchLimits, BlockShapes) {
  bool ran = false;
  EXPECT_EQ(try_launch(1, dim3(1024), 0, &ran), cudaSuccess);
  EXPECT_TRUE(ran);
  EXPECT_EQ(try_launch(1, dim3(1, 1024)), cudaSuccess);
  EXPECT_EQ(try_launch(1, dim3(1, 1, 64)), cudaSuccess);
  EXPECT_EQ(try_launch(1, dim3(32, 32)), cudaSuccess);  // exactly 1024 threads

  EXPECT_EQ(try_launch(1, dim3(1025), 0, &ran), cudaErrorInvalidConfiguration);
  EXPECT_FALSE(ran);
  EXPECT_EQ(try_launch(1, dim3(1, 1025)), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(1, dim3(1, 1, 65)), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(1, dim3(32, 33)), cudaErrorInvalidConfiguration);  // 1056 threads
  EXPECT_EQ(try_launch(1, dim3(16, 16, 8)), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(1, dim3(0)), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(1, dim3(4, 0)), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(1, dim3(4, 1, 0)), cudaErrorInvalidConfiguration);
}

TEST_F(LaunchLimits, GridShapes) {
  bool ran = false;
  EXPECT_EQ(try_launch(dim3(3, 65535), 1, 0, &ran), cudaSuccess);
  EXPECT_TRUE(ran);
  EXPECT_EQ(try_launch(dim3(1, 1, 65535), 1), cudaSuccess);

  EXPECT_EQ(try_launch(dim3(0x80000000u), 1, 0, &ran), cudaErrorInvalidConfiguration);  // 2^31
  EXPECT_FALSE(ran);
  EXPECT_EQ(try_launch(dim3(1, 65536), 1), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(dim3(1, 1, 65536), 1), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(dim3(0), 1), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(dim3(2, 0), 1), cudaErrorInvalidConfiguration);
  EXPECT_EQ(try_launch(dim3(2, 1, 0), 1), cudaErrorInvalidConfiguration);
}

__global__ void opted_in_kernel(int* runs) {
  atomicAdd(runs, 1);
}

TEST_F(LaunchLimits, DynamicSharedMemory) {
  bool ran = false;
  EXPECT_EQ(try_launch(1, 32, 48 * 1024, &ran), cudaSuccess);
  EXPECT_TRUE(ran);
  EXPECT_EQ(try_launch(1, 32, 48 * 1024 + 1, &ran), cudaErrorInvalidValue);
  EXPECT_FALSE(ran);

  // Above 48 KiB only after the kernel opts in, and never above the opt-in maximum (227 KiB on H100).
  EXPECT_EQ(cudaFuncSetAttribute(opted_in_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(opted_in_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024),
            cudaSuccess);
  EXPECT_EQ(launch(opted_in_kernel, 1, 32, 227 * 1024, nullptr, runs_.get()), cudaSuccess);
  EXPECT_EQ(launch(opted_in_kernel, 1, 32, 227 * 1024 + 1, nullptr, runs_.get()), cudaErrorInvalidValue);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(runs_.download()[0], 32);
  // The attribute belongs to that kernel only.
  EXPECT_EQ(try_launch(1, 32, 64 * 1024), cudaErrorInvalidValue);
}

TEST_F(LaunchLimits, UnknownStreamHandle) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(launch(count_kernel, 1, 1, 0, stream, runs_.get()), cudaErrorInvalidResourceHandle);
}

// A bad configuration is the thread's last error, once: it is not sticky, and the next launch works.
TEST_F(LaunchLimits, AConfigurationErrorIsNotSticky) {
  launch_kernel("count_kernel", count_kernel, 1, 2048, 0, nullptr, runs_.get());
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(launch(count_kernel, 2, 8, 0, nullptr, runs_.get()), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(runs_.download()[0], 16);
}

}  // namespace
}  // namespace lab::cuda::emu::test
