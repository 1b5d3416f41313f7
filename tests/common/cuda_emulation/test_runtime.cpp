// The emulated device and its memory: properties of an H100, the emulated capacity and out-of-memory,
// the allocation registry behind cudaPointerGetAttributes, and the argument checks of copies and frees.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/cuda/emulation/settings.h"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

using Runtime = EmulationTest;

TEST_F(Runtime, DescribesAnEmulatedH100) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, settings().device_count);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_NE(std::string(prop.name).find("Emulated NVIDIA H100"), std::string::npos) << prop.name;
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.maxThreadsDim[2], 64);
  EXPECT_EQ(prop.maxGridSize[0], 2147483647);
  EXPECT_EQ(prop.maxGridSize[1], 65535);
  EXPECT_EQ(prop.sharedMemPerBlock, 48u * 1024);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 227u * 1024);
  EXPECT_EQ(prop.totalGlobalMem, settings().device_memory_bytes);

  int value = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(value, 9);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(value, 132);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  EXPECT_EQ(value, 227 * 1024);
  EXPECT_EQ(cudaDeviceGetAttribute(&value, static_cast<cudaDeviceAttr>(9999), 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  int version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, CUDART_VERSION);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidConfiguration), "cudaErrorInvalidConfiguration");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
}

TEST_F(Runtime, TheEmulatedCapacityIsAHardLimit) {
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, settings().device_memory_bytes);
  void* block = nullptr;
  const size_t mib64 = size_t{64} << 20;
  ASSERT_EQ(cudaMalloc(&block, mib64), cudaSuccess);
  size_t free_during = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_during, &total), cudaSuccess);
  EXPECT_EQ(free_during, free_before - mib64);

  void* too_much = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaMalloc(&too_much, free_during + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(too_much, nullptr);
  EXPECT_EQ(cudaMalloc(&too_much, size_t{1} << 62), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);  // an error of the call, not a sticky fault
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  ASSERT_EQ(cudaFree(block), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
  void* none = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaMalloc(&none, 0), cudaSuccess);
  EXPECT_EQ(none, nullptr);

  // A device small enough to fill (ctest runs this suite with LAB_EMU_MEMORY=512M) fills up exactly at its
  // capacity, however much memory the host has left.
  if (total > (size_t{1} << 30)) return;
  const size_t chunk = total / 8;
  std::vector<void*> blocks;
  for (void* p = nullptr; blocks.size() < 9 && cudaMalloc(&p, chunk) == cudaSuccess;) blocks.push_back(p);
  EXPECT_EQ(blocks.size(), 8u);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  size_t free_full = 1;
  ASSERT_EQ(cudaMemGetInfo(&free_full, &total), cudaSuccess);
  EXPECT_EQ(free_full, 0u);
  ASSERT_EQ(cudaFree(blocks.back()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&blocks.back(), chunk), cudaSuccess) << "freed memory is available again";
  for (void* p : blocks) EXPECT_EQ(cudaFree(p), cudaSuccess);
}

// Memory nobody wrote reads as NaN (float) or -1 (int): it cannot pass for a result.
TEST_F(Runtime, NewDeviceMemoryIsPoisoned) {
  DeviceBuffer<float> f(1000);
  for (const float v : f.download()) ASSERT_TRUE(std::isnan(v));
  DeviceBuffer<int> i(10);
  for (const int v : i.download()) ASSERT_EQ(v, -1);
}

TEST_F(Runtime, PointerAttributesComeFromTheRegistry) {
  DeviceBuffer<float> device(100);
  PinnedBuffer<float> pinned(100);
  std::vector<float> pageable(100);
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, device.get() + 10), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.devicePointer, device.get() + 10);
  EXPECT_EQ(a.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned.get()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.hostPointer, pinned.get());
  ASSERT_EQ(cudaPointerGetAttributes(&a, pageable.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, pageable.data()), cudaErrorInvalidValue);
}

TEST_F(Runtime, FreesAndCopiesCheckTheirArguments) {
  DeviceBuffer<float> device(100);
  std::vector<float> host(200, 1.0f);
  int on_stack = 0;
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device.get() + 1), cudaErrorInvalidValue);  // not the start of an allocation
  EXPECT_EQ(cudaFreeHost(device.get()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // twice

  // A copy must stay inside its allocation, and an explicit direction must match the pointers.
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 100 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 101 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device.get() + 50, host.data(), 51 * sizeof(float), cudaMemcpyDefault), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 100, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 100, 4, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 4, static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemset(device.get() + 99, 0, 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(host.data(), 0, 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  // Device to device, and the default direction inferred from the pointers.
  DeviceBuffer<float> other(100);
  ASSERT_EQ(cudaMemset(other.get(), 0, 100 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(other.get() + 10, device.get(), 20 * sizeof(float), cudaMemcpyDeviceToDevice), cudaSuccess);
  const std::vector<float> got = other.download();
  EXPECT_EQ(got[9], 0.0f);
  EXPECT_EQ(got[10], 1.0f);
  EXPECT_EQ(got[29], 1.0f);
  EXPECT_EQ(got[30], 0.0f);
}

}  // namespace
}  // namespace lab::cuda::emu::test
