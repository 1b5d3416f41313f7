// The emulated wgmma (common/ops/cuda/warpgroup_mma.cuh): what a GPU does not forgive and the emulator must not
// either. A product is queued until the wait that covers it, so reading its accumulator before that wait reads what
// was there before; a product queued with no wgmma.fence since the thread's last wait, lanes of a warp that queue
// different products, a descriptor that asks for swizzling and an operand past the block's dynamic shared memory
// are faults naming the kernel, the block and the thread. (Its layouts are tested against a CPU product by
// tests/ch09_advanced/test_warpgroup_mma_cuda.cpp, which also runs on a GPU.)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/ops/cuda/warpgroup_mma.cuh"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

namespace wgmma = lab::ops::cuda::wgmma;

enum Misuse : int { kNone, kReadBeforeWait, kNoFence, kLanesDisagree, kSwizzled, kPastSharedMemory };

constexpr int kTileBytes = 64 * 16 * 2;  // A [64, 16] or B [16, 64] in 16 bits

// D [64, 64] = A B + C with every element of A and B 1 and C 0: each output 16 once the product has run. Thread i
// writes its 32 accumulator values to out[32 i ..].
__global__ void product_kernel(float* out, int misuse) {
  auto* shared = static_cast<unsigned char*>(lab::cuda::emu::device::dynamic_shared_memory());
  auto* tiles = reinterpret_cast<__nv_bfloat16*>(shared);
  for (int i = threadIdx.x; i < 2 * kTileBytes / 2; i += blockDim.x) tiles[i] = __float2bfloat16(1.0f);
  __syncthreads();
  float acc[8][4] = {};
  uint64_t desc_a = wgmma::descriptor(shared, 128, 256);
  uint64_t desc_b = wgmma::descriptor(shared + kTileBytes, 128, 256);
  if (misuse == kLanesDisagree && threadIdx.x % 32 == 7) desc_b = desc_a;
  if (misuse == kSwizzled) desc_b |= uint64_t{1} << 62;
  if (misuse == kPastSharedMemory) desc_b = wgmma::descriptor(shared + kTileBytes + 1024, 128, 256);
  wgmma::Warpgroup wg;
  if (misuse != kNoFence) wg.fence();
  wg.mma_shared_a<__nv_bfloat16, 64, wgmma::BMajor::K>(acc, desc_a, desc_b, true);
  wg.commit();
  if (misuse == kReadBeforeWait)
    for (int i = 0; i < 32; ++i) out[32 * threadIdx.x + i] = acc[i / 4][i % 4];
  wg.wait<0>();
  if (misuse != kReadBeforeWait)
    for (int i = 0; i < 32; ++i) out[32 * threadIdx.x + i] = acc[i / 4][i % 4];
}

class WgmmaEmulation : public EmulationTest {
 protected:
  std::vector<float> run_clean(Misuse misuse) {
    DeviceBuffer<float> out(128 * 32);
    EXPECT_EQ(launch(product_kernel, 1, 128, 2 * kTileBytes, nullptr, out.get(), static_cast<int>(misuse)),
              cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return out.download();
  }
  std::string run_faulting(Misuse misuse) {
    DeviceBuffer<float> out(128 * 32);
    launch_kernel("product_kernel", product_kernel, 1, 128, 2 * kTileBytes, nullptr, out.get(),
                  static_cast<int>(misuse));
    return expect_fault(cudaErrorLaunchFailure, {"kernel product_kernel", "block (0,0,0)", "thread ("});
  }
};

TEST_F(WgmmaEmulation, TheProductLandsAtItsWait) {
  EXPECT_EQ(run_clean(kNone), std::vector<float>(128 * 32, 16.0f));
}

TEST_F(WgmmaEmulation, AnAccumulatorReadBeforeTheWaitHoldsWhatWasThereBefore) {
  EXPECT_EQ(run_clean(kReadBeforeWait), std::vector<float>(128 * 32, 0.0f));
}

TEST_F(WgmmaEmulation, AProductWithNoFenceSinceTheLastWaitIsAFault) {
  const std::string fault = run_faulting(kNoFence);
  EXPECT_NE(fault.find("no wgmma.fence"), std::string::npos) << fault;
}

TEST_F(WgmmaEmulation, LanesThatQueueDifferentProductsAreAFault) {
  const std::string fault = run_faulting(kLanesDisagree);
  EXPECT_NE(fault.find("different products"), std::string::npos) << fault;
}

TEST_F(WgmmaEmulation, ASwizzledDescriptorIsAFault) {
  const std::string fault = run_faulting(kSwizzled);
  EXPECT_NE(fault.find("swizzling"), std::string::npos) << fault;
}

TEST_F(WgmmaEmulation, AnOperandPastTheBlocksSharedMemoryIsAFault) {
  const std::string fault = run_faulting(kPastSharedMemory);
  EXPECT_NE(fault.find("past the block's 4096 bytes of dynamic shared memory"), std::string::npos) << fault;
}

}  // namespace
}  // namespace lab::cuda::emu::test
