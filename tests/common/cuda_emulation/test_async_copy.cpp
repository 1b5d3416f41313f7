// Asynchronous copies into shared memory (include/cuda_pipeline_primitives.h, cp.async on a GPU): a copy lands
// only in the issuing thread's wait that covers its batch (under a shuffled schedule, sometimes at once), zfill
// writes zeros, a two-stage pipeline computes what
// plain loads compute, and the copies the hardware refuses (wrong size, misaligned, into global memory, from host
// memory) are faults naming the kernel and thread.
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/cuda/emulation/block_executor.h"
#include "common/cuda/emulation/settings.h"
#include "common/cuda/launch.cuh"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

constexpr int kThreads = 64;
constexpr int kWordsPerChunk = 4;  // one 16-byte copy
constexpr uint32_t kStale = 0xdeadbeefu;

// Each thread copies two 16-byte chunks of `src` into its own two slots of shared memory, in two batches, and
// writes what its slots hold before any wait, after waiting for all but the latest batch, and after waiting
// for all: seen[stage][slot][thread][word].
__global__ void staged_copies_kernel(uint32_t* seen, const uint32_t* src) {
  LAB_DYNAMIC_SHARED(uint32_t, shared);
  const int t = static_cast<int>(threadIdx.x);
  uint32_t* slot[2] = {shared + t * kWordsPerChunk, shared + (kThreads + t) * kWordsPerChunk};
  for (int s = 0; s < 2; ++s)
    for (int w = 0; w < kWordsPerChunk; ++w) slot[s][w] = kStale;
  for (int s = 0; s < 2; ++s) {
    __pipeline_memcpy_async(slot[s], src + (s * kThreads + t) * kWordsPerChunk, 16);
    __pipeline_commit();
  }
  const auto record = [&](int stage) {
    for (int s = 0; s < 2; ++s)
      for (int w = 0; w < kWordsPerChunk; ++w) seen[((stage * 2 + s) * kThreads + t) * kWordsPerChunk + w] = slot[s][w];
  };
  record(0);
  __pipeline_wait_prior(1);
  record(1);
  __pipeline_wait_prior(0);
  record(2);
}

// zfill: a 16-byte copy of which the last `zfill` bytes are zeros (the source is not read there).
__global__ void zero_fill_kernel(uint32_t* out, const uint32_t* src, int zfill) {
  LAB_DYNAMIC_SHARED(uint32_t, shared);
  for (int w = 0; w < kWordsPerChunk; ++w) shared[w] = kStale;
  __pipeline_memcpy_async(shared, src, 16, static_cast<size_t>(zfill));
  __pipeline_commit();
  __pipeline_wait_prior(0);
  for (int w = 0; w < kWordsPerChunk; ++w) out[w] = shared[w];
}

// The sum of n floats (n a multiple of 4 x kThreads) through a two-stage pipeline: the block copies chunk c + 1
// while it adds chunk c, as a tiled kernel overlaps its loads. Thread 0 writes the total.
__global__ void pipelined_sum_kernel(float* total, const float* x, int chunks) {
  LAB_DYNAMIC_SHARED(float, buffers);  // two buffers of 4 x kThreads floats
  const int t = static_cast<int>(threadIdx.x), chunk_floats = 4 * kThreads;
  const auto issue = [&](int c) {
    __pipeline_memcpy_async(buffers + (c % 2) * chunk_floats + 4 * t, x + c * chunk_floats + 4 * t, 16);
    __pipeline_commit();
  };
  float sum = 0.0f;  // thread 0's
  issue(0);
  for (int c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) {
      issue(c + 1);
      __pipeline_wait_prior(1);  // chunk c has landed; c + 1 may still be in flight
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();  // every thread's part of chunk c
    if (t == 0)
      for (int i = 0; i < chunk_floats; ++i) sum += buffers[(c % 2) * chunk_floats + i];
    __syncthreads();  // chunk c's buffer is free for chunk c + 2
  }
  if (t == 0) *total = sum;
}

enum Misuse : int { kTwelveBytes, kMisalignedSource, kIntoGlobalMemory, kFromHostMemory, kZfillPastTheCopy };

// `host` is the address of host memory as a number (a pointer argument into host memory is refused at launch).
__global__ void misuse_kernel(uint32_t* global, const uint32_t* src, uintptr_t host_address, int misuse) {
  LAB_DYNAMIC_SHARED(uint32_t, shared);
  const auto* host = reinterpret_cast<const uint32_t*>(host_address);
  switch (misuse) {
    case kTwelveBytes: __pipeline_memcpy_async(shared, src, 12); break;
    case kMisalignedSource: __pipeline_memcpy_async(shared, src + 1, 16); break;
    case kIntoGlobalMemory: __pipeline_memcpy_async(global, src, 16); break;
    case kFromHostMemory: __pipeline_memcpy_async(shared, host, 16); break;
    case kZfillPastTheCopy: __pipeline_memcpy_async(shared, src, 8, 16); break;
    default: break;
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
}

using AsyncCopy = EmulationTest;

std::vector<uint32_t> counting(size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 1u);
  return v;
}

TEST_F(AsyncCopy, ACopyLandsInTheWaitThatCoversItsBatch) {
  // Shuffled, copies may land as soon as they are issued (the next test): the latest moment is the default's.
  if (settings().seed) GTEST_SKIP() << "LAB_EMU_SEED is set: this checks the default schedule";
  const std::vector<uint32_t> source = counting(2 * kThreads * kWordsPerChunk);
  DeviceBuffer<uint32_t> src(source);
  DeviceBuffer<uint32_t> seen(3 * source.size());
  ASSERT_EQ(launch(staged_copies_kernel, 1, kThreads, source.size() * sizeof(uint32_t), nullptr, seen.get(), src.get()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint32_t> got = seen.download();
  const size_t slot_words = kThreads * kWordsPerChunk;
  for (size_t i = 0; i < slot_words; ++i) {
    SCOPED_TRACE("word " + std::to_string(i));
    EXPECT_EQ(got[0 * slot_words + i], kStale);  // before any wait: nothing landed
    EXPECT_EQ(got[1 * slot_words + i], kStale);
    EXPECT_EQ(got[2 * slot_words + i], source[i]);  // all but the latest batch: the first landed
    EXPECT_EQ(got[3 * slot_words + i], kStale);
    EXPECT_EQ(got[4 * slot_words + i], source[i]);  // all
    EXPECT_EQ(got[5 * slot_words + i], source[slot_words + i]);
  }
}

// Shuffled (LAB_EMU_SEED), some copies land as soon as they are issued, so that a buffer refilled too early is
// seen too early: over a few seeds, some slot holds its new contents before any wait, and every slot after.
TEST_F(AsyncCopy, UnderAShuffledScheduleSomeCopiesLandAtOnce) {
  const std::vector<uint32_t> source = counting(2 * kThreads * kWordsPerChunk);
  DeviceBuffer<uint32_t> src(source);
  DeviceBuffer<uint32_t> seen(3 * source.size());
  BoundKernel<uint32_t*, const uint32_t*> bound{staged_copies_kernel, {seen.get(), src.get()}};
  GridLaunch launch;
  launch.kernel = "staged_copies_kernel";
  launch.grid = dim3(1);
  launch.block = dim3(kThreads);
  launch.dynamic_shared_bytes = source.size() * sizeof(uint32_t);
  launch.run_thread = &BoundKernel<uint32_t*, const uint32_t*>::run_thread;
  launch.bound = &bound;
  int early = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    launch.seed = seed;
    ASSERT_FALSE(run_block(launch, uint3{0, 0, 0}));
    const std::vector<uint32_t> got = seen.download();
    for (size_t i = 0; i < source.size(); ++i) {
      early += got[i] == source[i];
      ASSERT_EQ(got[2 * source.size() + i], source[i]) << "seed " << seed << ", word " << i;
    }
  }
  EXPECT_GT(early, 0);
}

TEST_F(AsyncCopy, ZfillWritesZerosAtTheEndOfTheCopy) {
  DeviceBuffer<uint32_t> src(counting(kWordsPerChunk));
  DeviceBuffer<uint32_t> out(kWordsPerChunk);
  const std::vector<std::pair<int, std::vector<uint32_t>>> cases = {
      {0, {1, 2, 3, 4}}, {8, {1, 2, 0, 0}}, {16, {0, 0, 0, 0}}};
  for (const auto& [zfill, expected] : cases) {
    ASSERT_EQ(launch(zero_fill_kernel, 1, 1, 16, nullptr, out.get(), src.get(), zfill), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(out.download(), expected) << "zfill " << zfill;
  }
}

TEST_F(AsyncCopy, APipelinedSumAddsEveryChunk) {
  const int chunks = 5, n = chunks * 4 * kThreads;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17);  // sums exact in float
  DeviceBuffer<float> in(x);
  DeviceBuffer<float> total(1);
  ASSERT_EQ(launch(pipelined_sum_kernel, 1, kThreads, 2 * 4 * kThreads * sizeof(float), nullptr, total.get(), in.get(),
                   chunks),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(total.download()[0], std::accumulate(x.begin(), x.end(), 0.0f));
}

class AsyncCopyMisuse : public EmulationTest {
 protected:
  std::string run(Misuse misuse) {
    DeviceBuffer<uint32_t> src(counting(8));
    DeviceBuffer<uint32_t> global(8);
    std::vector<uint32_t> host(8, 7);
    launch_kernel("misuse_kernel", misuse_kernel, 1, 1, 64, nullptr, global.get(), src.get(),
                  reinterpret_cast<uintptr_t>(host.data()), static_cast<int>(misuse));
    return expect_fault(cudaErrorLaunchFailure, {"kernel misuse_kernel", "thread (0,0,0)", "__pipeline_memcpy_async"});
  }
};

TEST_F(AsyncCopyMisuse, ACopyOfTwelveBytesIsAFault) {
  EXPECT_NE(run(kTwelveBytes).find("copies 4, 8 or 16 bytes"), std::string::npos);
}
TEST_F(AsyncCopyMisuse, AMisalignedSourceIsAFault) {
  EXPECT_NE(run(kMisalignedSource).find("aligned to the bytes copied"), std::string::npos);
}
TEST_F(AsyncCopyMisuse, ACopyIntoGlobalMemoryIsAFault) {
  EXPECT_NE(run(kIntoGlobalMemory).find("not in the block's dynamic shared memory"), std::string::npos);
}
TEST_F(AsyncCopyMisuse, ACopyFromHostMemoryIsAFault) {
  EXPECT_NE(run(kFromHostMemory).find("the source is not 16 bytes of device memory"), std::string::npos);
}
TEST_F(AsyncCopyMisuse, AZfillLargerThanTheCopyIsAFault) {
  EXPECT_NE(run(kZfillPastTheCopy).find("zfill is more than the bytes copied"), std::string::npos);
}

}  // namespace
}  // namespace lab::cuda::emu::test
