// The shuffled schedule (LAB_EMU_SEED): race-free kernels give the same results under every seed, and a
// kernel with a missing barrier, right by luck in the default order, is caught by some seed; so is a buffer
// refilled by one warp before another has read it, which needs one warp far ahead of another. The block
// executor is driven directly here, so that one process can try many seeds.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/cuda/emulation/block_executor.h"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

constexpr int kThreads = 128;

// Thread t reads what thread t - 1 wrote. With the barrier this is always right.
__global__ void neighbour_kernel(int* out, int base) {
  __shared__ int values[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  values[t] = base + t;
  __syncthreads();
  out[t] = t > 0 ? values[t - 1] : -1;
}

// The same without the barrier: right only when thread t - 1 happens to run before thread t, as it does
// in the default order.
__global__ void racy_neighbour_kernel(int* out, int base) {
  __shared__ int values[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  values[t] = base + t;
  out[t] = t > 0 ? values[t - 1] : -1;
}

// A reduction whose order is fixed by barriers and shuffles: bit-identical under every schedule.
__global__ void reduction_kernel(float* out, const float* in) {
  __shared__ float warp_sums[kThreads / 32];
  const int t = static_cast<int>(threadIdx.x);
  float v = in[t];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (t % 32 == 0) warp_sums[t / 32] = v;
  __syncthreads();
  if (t == 0) {
    float total = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    out[0] = total;
  }
}

// Each step every thread stores a new value into a shared buffer; after a barrier each lane reads the value of
// the same lane in the next warp, between warp collectives (as a tile product's fragments are read between mma
// instructions), and the next step stores again. With two buffers used in turn, one barrier a step is enough: a
// warp refills a buffer only after the next barrier, which every warp reaches after its read. With one buffer a
// fast warp refills it while a slow one has still to read it: right when the warps keep in step, as they do in
// the default order and, with 16 collectives on each side of the read, when the threads are interleaved at random
// at every collective (no warp gets 16 collectives ahead); only the warp-by-warp order lets one run that far ahead.
constexpr int kSteps = 4, kCollectives = 16;
__global__ void step_buffers_kernel(int* out, int base, int buffers) {
  __shared__ int slots[2][kThreads];
  const int t = static_cast<int>(threadIdx.x), lane = t % 32, next_warp = (t / 32 + 1) % (kThreads / 32);
  int sum = 0;
  for (int step = 0; step < kSteps; ++step) {
    int* slot = slots[step % buffers];
    slot[t] = base + step * kThreads + t;
    __syncthreads();
    int v = lane;
    for (int i = 0; i < kCollectives; ++i) v = __shfl_xor_sync(0xffffffffu, v, 1);  // collectives before the read
    sum += slot[next_warp * 32 + lane];
    for (int i = 0; i < kCollectives; ++i) v = __shfl_xor_sync(0xffffffffu, v, 2);  // and after it
    sum += v - lane;  // an even number of swaps: v is the lane's own again
  }
  out[t] = sum;
}

bool step_sums_right(const std::vector<int>& out, int base) {
  for (int t = 0; t < kThreads; ++t) {
    const int read = (t / 32 + 1) % (kThreads / 32) * 32 + t % 32;
    int expected = 0;
    for (int step = 0; step < kSteps; ++step) expected += base + step * kThreads + read;
    if (out[static_cast<size_t>(t)] != expected) return false;
  }
  return true;
}

// Runs one block of `kernel` on this thread with the given seed (none: the default order).
template <typename... Params, typename... Args>
std::optional<std::string> run_one_block(void (*kernel)(Params...), std::optional<uint64_t> seed, Args... args) {
  BoundKernel<Params...> bound{kernel, std::tuple<Params...>(args...)};
  GridLaunch launch;
  launch.kernel = "schedule_test";
  launch.grid = dim3(1);
  launch.block = dim3(kThreads);
  launch.run_thread = &BoundKernel<Params...>::run_thread;
  launch.bound = &bound;
  launch.seed = seed;
  return run_block(launch, uint3{0, 0, 0});
}

bool neighbours_right(const std::vector<int>& out, int base) {
  for (int t = 1; t < kThreads; ++t)
    if (out[static_cast<size_t>(t)] != base + t - 1) return false;
  return true;
}

TEST(ShuffledSchedule, RaceFreeKernelsGiveTheSameResultsUnderEverySeed) {
  std::vector<float> in(kThreads);
  for (int t = 0; t < kThreads; ++t) in[static_cast<size_t>(t)] = 1.0f / static_cast<float>(t + 3);
  float reference = 0.0f;
  ASSERT_FALSE(run_one_block(reduction_kernel, std::nullopt, &reference, in.data()));
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    std::vector<int> out(kThreads);
    const int base = 1000 * static_cast<int>(seed);  // a new value each run: stale shared memory cannot pass
    ASSERT_FALSE(run_one_block(neighbour_kernel, seed, out.data(), base));
    EXPECT_TRUE(neighbours_right(out, base)) << "seed " << seed;
    float total = 0.0f;
    ASSERT_FALSE(run_one_block(reduction_kernel, seed, &total, in.data()));
    EXPECT_EQ(total, reference) << "seed " << seed;
  }
}

TEST(ShuffledSchedule, SomeSeedExposesAMissingBarrier) {
  std::vector<int> out(kThreads);
  ASSERT_FALSE(run_one_block(racy_neighbour_kernel, std::nullopt, out.data(), 7));
  ASSERT_TRUE(neighbours_right(out, 7)) << "the default order runs threads in index order";
  int exposed = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    const int base = 100 * static_cast<int>(seed);
    ASSERT_FALSE(run_one_block(racy_neighbour_kernel, seed, out.data(), base));
    if (!neighbours_right(out, base)) ++exposed;
  }
  EXPECT_GT(exposed, 0) << "no seed of 16 changed the order threads run in";
}

TEST(ShuffledSchedule, SomeSeedRunsAWarpFarAheadOfAnother) {
  std::vector<int> out(kThreads);
  ASSERT_FALSE(run_one_block(step_buffers_kernel, std::nullopt, out.data(), 5, 1));
  ASSERT_TRUE(step_sums_right(out, 5)) << "the default order keeps the warps in step";
  int exposed = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    const int base = 1000 * static_cast<int>(seed);
    ASSERT_FALSE(run_one_block(step_buffers_kernel, seed, out.data(), base, 2));
    EXPECT_TRUE(step_sums_right(out, base)) << "two buffers, seed " << seed;
    ASSERT_FALSE(run_one_block(step_buffers_kernel, seed, out.data(), base, 1));
    if (!step_sums_right(out, base)) ++exposed;
  }
  EXPECT_GT(exposed, 0) << "no seed of 16 let a warp refill the one buffer before another read it";
}

TEST(ShuffledSchedule, SeededMisuseIsStillAFault) {
  int out[kThreads];
  const std::optional<std::string> fault = run_one_block(
      +[](int* o) {
        if (threadIdx.x == 3) return;
        __syncthreads();
        o[threadIdx.x] = 0;
      },
      uint64_t{5}, out);
  ASSERT_TRUE(fault.has_value());
  EXPECT_NE(fault->find("__syncthreads"), std::string::npos) << *fault;
  EXPECT_NE(fault->find("kernel schedule_test, block (0,0,0)"), std::string::npos) << *fault;
}

}  // namespace
}  // namespace lab::cuda::emu::test
