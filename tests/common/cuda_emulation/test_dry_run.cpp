// The dry run (common/cuda/emulation/dry_run.h): kernels, products, memsets and device-to-device copies are
// checked but not run, copies from and to the host still run, new memory is not poisoned, and a kernel's
// arguments are still checked as before.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/cuda/emulation/dry_run.h"
#include "common/cuda/emulation/memory.h"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

// Every test runs in a dry run and turns it off at the end, whatever happened.
class DryRun : public EmulationTest {
 protected:
  void SetUp() override {
    EmulationTest::SetUp();
    set_dry_run(true);
  }
  void TearDown() override {
    set_dry_run(false);
    EmulationTest::TearDown();
  }
};

__global__ void fill_kernel(int* out, int n, int value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

TEST_F(DryRun, AKernelIsCheckedButNotRun) {
  DeviceBuffer<int> out(std::vector<int>(64, 7));
  ASSERT_EQ(launch(fill_kernel, 2, 32, 0, nullptr, out.get(), 64, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const int v : out.download()) ASSERT_EQ(v, 7) << "the kernel ran";

  // Still refused as on a GPU: a block larger than 1024 threads, and a host pointer as an argument.
  EXPECT_EQ(launch(fill_kernel, 1, 2048, 0, nullptr, out.get(), 64, 1), cudaErrorInvalidConfiguration);
  std::vector<int> host(64, 0);
  testing::internal::CaptureStderr();
  EXPECT_EQ(launch(fill_kernel, 2, 32, 0, nullptr, host.data(), 64, 1), cudaErrorIllegalAddress);
  testing::internal::GetCapturedStderr();
}

TEST_F(DryRun, ALargeBlockIsMappedWithoutReservingHostMemory) {
  // A block above 1 MiB is never touched by a dry run: it is mapped without reserving host memory (MAP_NORESERVE),
  // so that a dry run of an 80 GB GPU's step, whose logits alone can be larger than the host's memory, is not
  // refused by the host's overcommit heuristic. Smaller blocks are ordinary (zeroed) allocations.
  void* large = nullptr;
  void* small = nullptr;
  ASSERT_EQ(cudaMalloc(&large, size_t{64} << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&small, 4096), cudaSuccess);
  ASSERT_TRUE(find_allocation(large).has_value());
  EXPECT_TRUE(find_allocation(large)->mapped);
  EXPECT_FALSE(find_allocation(small)->mapped);
  // The large block still takes copies from and to the host, as any block does.
  const std::vector<int> values{1, 2, 3};
  ASSERT_EQ(cudaMemcpy(large, values.data(), sizeof(int) * 3, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<int> back(3);
  ASSERT_EQ(cudaMemcpy(back.data(), large, sizeof(int) * 3, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, values);
  EXPECT_EQ(cudaFree(large), cudaSuccess);
  EXPECT_EQ(cudaFree(small), cudaSuccess);
  EXPECT_FALSE(find_allocation(large).has_value());
}

TEST_F(DryRun, TheSameKernelRunsWhenTheDryRunEnds) {
  DeviceBuffer<int> out(std::vector<int>(64, 7));
  set_dry_run(false);
  ASSERT_EQ(launch(fill_kernel, 2, 32, 0, nullptr, out.get(), 64, 1), cudaSuccess);
  for (const int v : out.download()) ASSERT_EQ(v, 1);
}

TEST_F(DryRun, MemsetsAndDeviceCopiesDoNothingHostCopiesRun) {
  DeviceBuffer<int> a(std::vector<int>{1, 2, 3, 4});
  DeviceBuffer<int> b(std::vector<int>{5, 6, 7, 8});
  ASSERT_EQ(cudaMemset(a.get(), 0, 4 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.get(), a.get(), 4 * sizeof(int), cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(a.download(), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(b.download(), (std::vector<int>{5, 6, 7, 8}));
  // Their arguments are still checked: a copy past the end of its allocation.
  EXPECT_EQ(cudaMemcpy(b.get(), a.get(), 8 * sizeof(int), cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
}

TEST_F(DryRun, NewSmallMemoryReadsAsZerosNotPoison) {
  DeviceBuffer<float> small(1000);
  for (const float v : small.download()) ASSERT_EQ(v, 0.0f);
}

TEST_F(DryRun, AProductIsNotRun) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const int n = 4;
  DeviceBuffer<float> a(std::vector<float>(n * n, 1.0f)), b(std::vector<float>(n * n, 1.0f)),
      c(std::vector<float>(n * n, 3.0f));
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.get(), n, b.get(), n, &zero, c.get(), n),
            CUBLAS_STATUS_SUCCESS);
  for (const float v : c.download()) EXPECT_EQ(v, 3.0f) << "the product ran";
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace lab::cuda::emu::test
