// The block executor: built-in indices, barriers and shared memory, every warp collective with full and
// partial masks, atomics under contention from many blocks, and dynamic shared memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "common/cuda/emulation/settings.h"
#include "common/cuda/launch.cuh"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// ---------------------------------------------------------------- indices

// Each thread writes its coordinates where its global linear index says.
__global__ void coordinates_kernel(uint4* out, uint4* dims) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + thread] = make_uint4(threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16,
                                               blockIdx.x | blockIdx.y << 8 | blockIdx.z << 16, thread, block);
  if (block == 0 && thread == 0) {
    dims[0] = make_uint4(blockDim.x, blockDim.y, blockDim.z, 0);
    dims[1] = make_uint4(gridDim.x, gridDim.y, gridDim.z, 0);
  }
}

using BlockExecutor = EmulationTest;

TEST_F(BlockExecutor, EveryThreadOfTheGridRunsOnceWithItsCoordinates) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const unsigned per_block = 24, blocks = 12;
  DeviceBuffer<uint4> out(per_block * blocks), dims(2);
  ASSERT_EQ(launch(coordinates_kernel, grid, block, 0, nullptr, out.get(), dims.get()), cudaSuccess);
  const std::vector<uint4> got = out.download();
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < per_block; ++t) {
      const uint4 v = got[b * per_block + t];
      const unsigned tx = t % 4, ty = t / 4 % 3, tz = t / 12;
      const unsigned bx = b % 3, by = b / 3 % 2, bz = b / 6;
      EXPECT_EQ(v.x, tx | ty << 8 | tz << 16) << "block " << b << " thread " << t;
      EXPECT_EQ(v.y, bx | by << 8 | bz << 16) << "block " << b << " thread " << t;
      EXPECT_EQ(v.z, t);
      EXPECT_EQ(v.w, b);
    }
  }
  const std::vector<uint4> d = dims.download();
  EXPECT_EQ(d[0].x, 4u);
  EXPECT_EQ(d[0].y, 3u);
  EXPECT_EQ(d[0].z, 2u);
  EXPECT_EQ(d[1].x, 3u);
  EXPECT_EQ(d[1].y, 2u);
  EXPECT_EQ(d[1].z, 2u);
}

// ---------------------------------------------------------------- barriers and shared memory

// Thread t reads what thread t + 1 wrote: right only if the barrier holds every thread until all have written.
__global__ void rotate_kernel(int* out, int base) {
  __shared__ int values[256];
  const unsigned t = threadIdx.x;
  values[t] = base + 3 * static_cast<int>(t);
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = values[(t + 1) % blockDim.x];
}

TEST_F(BlockExecutor, BarrierMakesEveryWriteVisibleToTheBlock) {
  DeviceBuffer<int> out(4 * 256);
  for (const int base : {7, 1000}) {  // a new base each launch: stale shared memory cannot pass for a result
    ASSERT_EQ(launch(rotate_kernel, 4, 256, 0, nullptr, out.get(), base), cudaSuccess);
    const std::vector<int> got = out.download();
    for (int b = 0; b < 4; ++b)
      for (int t = 0; t < 256; ++t) ASSERT_EQ(got[b * 256 + t], base + 3 * ((t + 1) % 256)) << b << "/" << t;
  }
}

// A tree reduction over a 3-D block, a barrier at every level.
__global__ void block_sum_kernel(float* out) {
  __shared__ float partial[64];
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  partial[t] = static_cast<float>(t + 1 + blockIdx.x);
  __syncthreads();
  for (unsigned stride = 32; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

TEST_F(BlockExecutor, TreeReductionWithABarrierPerLevel) {
  DeviceBuffer<float> out(5);
  ASSERT_EQ(launch(block_sum_kernel, 5, dim3(8, 4, 2), 0, nullptr, out.get()), cudaSuccess);
  const std::vector<float> got = out.download();
  for (int b = 0; b < 5; ++b) EXPECT_EQ(got[b], 2080.0f + 64.0f * static_cast<float>(b));  // sum 1..64 = 2080
}

// ---------------------------------------------------------------- warp collectives, full mask

constexpr int kResults = 12;

__device__ int lane_value(int lane) {
  return 100 + lane * lane;
}

__global__ void full_mask_kernel(long long* out) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int v = lane_value(lane) + 10000 * (tid / 32);
  long long* o = out + tid * kResults;
  o[0] = __shfl_sync(kFull, v, 5);
  o[1] = __shfl_sync(kFull, v, 31 - lane);
  o[2] = __shfl_sync(kFull, v, 2, 8);
  o[3] = __shfl_up_sync(kFull, v, 3, 8);
  o[4] = __shfl_down_sync(kFull, v, 1);
  o[5] = __shfl_down_sync(kFull, v, 2, 8);
  o[6] = __shfl_xor_sync(kFull, v, 16);
  o[7] = __shfl_xor_sync(kFull, v, 1, 16);
  o[8] = __ballot_sync(kFull, lane % 3 == 0);
  o[9] = __any_sync(kFull, lane == 17) * 10 + __any_sync(kFull, lane > 40);
  o[10] = __all_sync(kFull, lane < 32) * 10 + __all_sync(kFull, lane != 4);
  // 64-bit and floating-point values travel whole.
  const double d = 0.5 + static_cast<double>(v) * 1e9;
  o[11] = static_cast<long long>(__shfl_xor_sync(kFull, d, 3) - 0.5);
  __syncwarp();
}

TEST_F(BlockExecutor, WarpCollectivesWithTheFullMask) {
  const int threads = 64;  // two warps: lanes index within their warp
  DeviceBuffer<long long> out(threads * kResults);
  ASSERT_EQ(launch(full_mask_kernel, 1, threads, 0, nullptr, out.get()), cudaSuccess);
  const std::vector<long long> got = out.download();
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int tid = 0; tid < threads; ++tid) {
    const int lane = tid % 32, warp = tid / 32;
    const auto v = [&](int l) { return static_cast<long long>(lane_value(l) + 10000 * warp); };
    const long long* o = got.data() + tid * kResults;
    EXPECT_EQ(o[0], v(5)) << "broadcast, lane " << lane;
    EXPECT_EQ(o[1], v(31 - lane)) << "per-lane source, lane " << lane;
    EXPECT_EQ(o[2], v(lane / 8 * 8 + 2)) << "source within a segment of 8, lane " << lane;
    EXPECT_EQ(o[3], lane % 8 >= 3 ? v(lane - 3) : v(lane)) << "up 3 in segments of 8, lane " << lane;
    EXPECT_EQ(o[4], lane < 31 ? v(lane + 1) : v(lane)) << "down 1, lane " << lane;
    EXPECT_EQ(o[5], lane % 8 + 2 < 8 ? v(lane + 2) : v(lane)) << "down 2 in segments of 8, lane " << lane;
    EXPECT_EQ(o[6], v(lane ^ 16)) << "xor 16, lane " << lane;
    EXPECT_EQ(o[7], v(lane ^ 1)) << "xor 1 in segments of 16, lane " << lane;
    EXPECT_EQ(static_cast<unsigned>(o[8]), ballot) << "ballot, lane " << lane;
    EXPECT_EQ(o[9], 10) << "any, lane " << lane;
    EXPECT_EQ(o[10], 10) << "all, lane " << lane;
    EXPECT_EQ(o[11], static_cast<long long>(static_cast<double>(v(lane ^ 3)) * 1e9)) << "xor of doubles, lane " << lane;
  }
}

// ---------------------------------------------------------------- warp collectives, partial masks

__global__ void partial_mask_kernel(int* out, unsigned* masks) {
  const int lane = static_cast<int>(threadIdx.x);
  const int v = lane_value(lane);
  // The two halves of the warp take different branches, each with its own collectives.
  if (lane < 16) {
    out[lane] = __shfl_xor_sync(0x0000ffffu, v, 1);
    masks[lane] = __ballot_sync(0x0000ffffu, lane % 2 == 1);
  } else {
    out[lane] = __shfl_down_sync(0xffff0000u, v, 2);
    masks[lane] = __ballot_sync(0xffff0000u, lane >= 30);
  }
  if (lane % 4 == 0) {
    __syncwarp(0x11111111u);
    out[32 + lane] = __shfl_sync(0x11111111u, v, (lane + 4) % 32);
  }
}

TEST_F(BlockExecutor, WarpCollectivesWithPartialMasks) {
  DeviceBuffer<int> out(64);
  DeviceBuffer<unsigned> masks(32);
  ASSERT_EQ(launch(partial_mask_kernel, 1, 32, 0, nullptr, out.get(), masks.get()), cudaSuccess);
  const std::vector<int> got = out.download();
  const std::vector<unsigned> ballots = masks.download();
  for (int lane = 0; lane < 32; ++lane) {
    if (lane < 16) {
      EXPECT_EQ(got[lane], lane_value(lane ^ 1)) << lane;
      EXPECT_EQ(ballots[lane], 0x0000aaaau) << lane;
    } else {
      EXPECT_EQ(got[lane], lane + 2 <= 31 ? lane_value(lane + 2) : lane_value(lane)) << lane;
      EXPECT_EQ(ballots[lane], 0xc0000000u) << lane;
    }
    if (lane % 4 == 0) {
      EXPECT_EQ(got[32 + lane], lane_value((lane + 4) % 32)) << lane;
    }
  }
}

__global__ void active_mask_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x;
  if (lane < 8) return;
  __syncwarp(0xffffff00u);
  out[lane] = __activemask();
}

// __activemask: the lanes of the warp that have not exited. (The emulator cannot see which lanes a GPU
// would run together; lanes not started yet count as active, so under a shuffled schedule lanes 0-7 may
// still be counted.)
TEST_F(BlockExecutor, ActiveMaskLeavesOutExitedLanes) {
  DeviceBuffer<unsigned> out(32);
  ASSERT_EQ(launch(active_mask_kernel, 1, 32, 0, nullptr, out.get()), cudaSuccess);
  const std::vector<unsigned> got = out.download();
  for (unsigned lane = 8; lane < 32; ++lane) {
    EXPECT_EQ((got[lane] >> lane) & 1u, 1u) << "the calling lane is active, lane " << lane;
    if (!settings().seed) {
      EXPECT_EQ(got[lane] & 0xffu, 0u) << "lanes 0-7 exited before lane " << lane << " asked";
    }
  }
}

// ---------------------------------------------------------------- atomics

struct Counters {
  int count;
  float fsum;
  double dsum;
  unsigned long long usum;
  int max;
  int min;
  unsigned bits_or;
  unsigned bits_xor;
  unsigned bits_and;
  int cas_count;
  unsigned wrap;
  int slot;
  unsigned long long exchanged;
};

constexpr int kRepeats = 64;

__global__ void atomics_kernel(Counters* c) {
  const int gid = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  // Many increments per thread, so that the blocks running on different OS threads overlap in time; the
  // fence keeps a compiler from merging them (should atomicAdd ever stop being atomic).
  for (int r = 0; r < kRepeats; ++r) {
    atomicAdd(&c->count, 1);
    atomicAdd(&c->fsum, 1.0f);
    __threadfence();
  }
  atomicAdd(&c->dsum, 0.5);
  atomicAdd(&c->usum, 3ull);
  atomicMax(&c->max, gid);
  atomicMin(&c->min, -gid);
  atomicOr(&c->bits_or, 1u << (gid % 32));
  atomicXor(&c->bits_xor, 1u);
  atomicAnd(&c->bits_and, ~(1u << (gid % 32)));
  int old = atomicAdd(&c->cas_count, 0);  // an atomic read
  for (int seen; (seen = atomicCAS(&c->cas_count, old, old + 1)) != old;) old = seen;
  atomicInc(&c->wrap, 9u);
  atomicAdd(&c->exchanged, static_cast<unsigned long long>(atomicExch(&c->slot, gid)));
}

TEST_F(BlockExecutor, AtomicsAreAtomicAcrossBlocksRunningInParallel) {
  const int blocks = 128, threads = 256, n = blocks * threads;
  Counters start{};
  start.bits_and = 0xffffffffu;
  start.slot = 5;
  DeviceBuffer<Counters> c(std::vector<Counters>{start});
  ASSERT_EQ(launch(atomics_kernel, blocks, threads, 0, nullptr, c.get()), cudaSuccess);
  const Counters r = c.download()[0];
  EXPECT_EQ(r.count, n * kRepeats);
  EXPECT_EQ(r.fsum, static_cast<float>(n * kRepeats));  // every partial sum is an integer below 2^24: exact
  EXPECT_EQ(r.dsum, 0.5 * n);
  EXPECT_EQ(r.usum, 3ull * n);
  EXPECT_EQ(r.max, n - 1);
  EXPECT_EQ(r.min, -(n - 1));
  EXPECT_EQ(r.bits_or, 0xffffffffu);
  EXPECT_EQ(r.bits_xor, 0u);  // an even number of flips
  EXPECT_EQ(r.bits_and, 0u);
  EXPECT_EQ(r.cas_count, n);
  EXPECT_EQ(r.wrap, static_cast<unsigned>(n % 10));
  // Every value put in the slot comes out exactly once: taken out by an exchange, or left at the end.
  const unsigned long long all = 5ull + static_cast<unsigned long long>(n) * (n - 1) / 2;
  EXPECT_EQ(r.exchanged + static_cast<unsigned long long>(r.slot), all);
}

// ---------------------------------------------------------------- dynamic shared memory

// Fills the block's dynamic shared memory, then reads it back reversed after a barrier.
__global__ void reverse_kernel(float* out, int n) {
  LAB_DYNAMIC_SHARED(float, buffer);
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
    buffer[i] = static_cast<float>(i) * 0.5f + static_cast<float>(blockIdx.x) * 1e5f;
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
    out[blockIdx.x * n + i] = buffer[n - 1 - i];
}

void expect_reversed(const std::vector<float>& got, int blocks, int n) {
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(got[static_cast<size_t>(b * n + i)],
                static_cast<float>(n - 1 - i) * 0.5f + static_cast<float>(b) * 1e5f)
          << "block " << b << " element " << i;
}

TEST_F(BlockExecutor, DynamicSharedMemoryIsPerBlockAndSizedByTheLaunch) {
  const int blocks = 6;
  const int n = 12 * 1024;  // 48 KiB: the default limit
  DeviceBuffer<float> out(blocks * n);
  ASSERT_EQ(launch(reverse_kernel, blocks, 128, n * sizeof(float), nullptr, out.get(), n), cudaSuccess);
  expect_reversed(out.download(), blocks, n);

  const int large = 50 * 1024;  // 200 KiB, allowed once the kernel opts in
  ASSERT_EQ(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, large * 4), cudaSuccess);
  DeviceBuffer<float> out_large(blocks * large);
  ASSERT_EQ(launch(reverse_kernel, blocks, 256, large * sizeof(float), nullptr, out_large.get(), large), cudaSuccess);
  expect_reversed(out_large.download(), blocks, large);
}

}  // namespace
}  // namespace lab::cuda::emu::test
