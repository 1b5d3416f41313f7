// The CUDA caching allocator: block and segment sizes, reuse, cutting and merging of freed blocks, per-category
// accounting, separation of streams, blocks used on other streams (record_stream), the blocks of destroyed
// streams, emptying the cache, the error when the device is out of memory, private pools, and (in the sanitized
// emulation build) AddressSanitizer's marks of the bytes past a tensor's end and of freed blocks.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/cuda/caching_allocator.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/cuda/stream_gate.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using test::kGpu;
using test::StreamGate;

// A private pool's size classes: a pure function of the size, checked on every machine.
TEST(CudaAllocator, PoolSizeClassesAreQuarterPowersOfTwoThenStepsOf2MiB) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(cuda::cuda_size_class(0), 512u);
  EXPECT_EQ(cuda::cuda_size_class(1), 512u);
  EXPECT_EQ(cuda::cuda_size_class(512), 512u);
  EXPECT_EQ(cuda::cuda_size_class(513), 640u);
  EXPECT_EQ(cuda::cuda_size_class(1000), 1024u);
  EXPECT_EQ(cuda::cuda_size_class(1025), 1280u);
  EXPECT_EQ(cuda::cuda_size_class((size_t{3} << 20) + 1), size_t{7} << 19);
  EXPECT_EQ(cuda::cuda_size_class(9 * kMiB + 1), 10 * kMiB);
  EXPECT_EQ(cuda::cuda_size_class(size_t{1} << 30), size_t{1} << 30);
  // GPT-2 124M's flat parameter buffer (124,475,904 floats with the padded vocabulary): 476 MiB, not 512.
  EXPECT_EQ(cuda::cuda_size_class(size_t{124475904} * 4), 476 * kMiB);
  for (size_t bytes = 1; bytes < (size_t{1} << 34); bytes = bytes * 3 + 1) {
    const size_t size = cuda::cuda_size_class(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size, std::max<size_t>(512, bytes + bytes / 4)) << bytes;  // at most 25% slack
    if (bytes > 8 * kMiB) {
      EXPECT_LT(size, bytes + 2 * kMiB) << bytes;  // and less than 2 MiB above 8 MiB
    }
  }
}

// Pure functions of the size: checked on every machine.
TEST(CudaAllocator, BlocksAreRequestsRoundedTo512BytesAndSegmentsTo2MiB) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(cuda::cuda_block_size(0), 512u);
  EXPECT_EQ(cuda::cuda_block_size(1), 512u);
  EXPECT_EQ(cuda::cuda_block_size(513), 1024u);
  EXPECT_EQ(cuda::cuda_block_size(48 * kMiB + 1), 48 * kMiB + 512);
  EXPECT_EQ(cuda::cuda_segment_size(4000), 2 * kMiB);  // small: a 2 MiB segment of small blocks
  EXPECT_EQ(cuda::cuda_segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(cuda::cuda_segment_size(kMiB + 1), 2 * kMiB);  // large: its size rounded up to 2 MiB
  EXPECT_EQ(cuda::cuda_segment_size(48 * kMiB + 1), 50 * kMiB);
  EXPECT_EQ(cuda::cuda_segment_size(48 * kMiB), 48 * kMiB);
}

// Each test below allocates on a stream of its own, whose free blocks no other test touches.
TEST(CudaAllocator, AFreedBlockIsReusedWithoutACudaMalloc) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  cuda::Stream stream;
  cuda::StreamGuard on(stream);
  void* first = alloc.allocate(4000, MemCategory::Other);
  alloc.deallocate(first, 4000, MemCategory::Other);
  const int64_t mallocs = alloc.stats().system_allocs;
  void* second = alloc.allocate(3900, MemCategory::Other);
  EXPECT_EQ(second, first) << "the freed block joined the rest of its segment, which starts at it";
  EXPECT_EQ(alloc.stats().system_allocs, mallocs) << "a cached block must not cost a cudaMalloc";
  alloc.deallocate(second, 3900, MemCategory::Other);
}

TEST(CudaAllocator, ALargeRequestCutsTheBestFittingFreeBlockAndFreedPiecesMerge) {
  LAB_REQUIRE_GPU();
  constexpr size_t kMiB = size_t{1} << 20;
  Allocator& alloc = cuda::caching_allocator(0);
  cuda::Stream stream;
  cuda::StreamGuard on(stream);
  char* block = static_cast<char*>(alloc.allocate(24 * kMiB, MemCategory::Other));
  alloc.deallocate(block, 24 * kMiB, MemCategory::Other);
  const int64_t mallocs = alloc.stats().system_allocs, live = alloc.stats().live_total;
  // Two pieces of the free 24 MiB: each counted at its own size, neither a cudaMalloc.
  void* first = alloc.allocate(17 * kMiB, MemCategory::Other);
  void* second = alloc.allocate(7 * kMiB - 100, MemCategory::Other);
  EXPECT_EQ(first, block);
  EXPECT_EQ(second, block + 17 * kMiB);
  EXPECT_EQ(alloc.stats().system_allocs, mallocs);
  EXPECT_EQ(alloc.stats().live_total - live, static_cast<int64_t>(24 * kMiB));
  // Freed, the pieces are one block again, which holds the whole 24 MiB.
  alloc.deallocate(first, 17 * kMiB, MemCategory::Other);
  alloc.deallocate(second, 7 * kMiB - 100, MemCategory::Other);
  void* whole = alloc.allocate(24 * kMiB, MemCategory::Other);
  EXPECT_EQ(whole, block);
  EXPECT_EQ(alloc.stats().system_allocs, mallocs);
  alloc.deallocate(whole, 24 * kMiB, MemCategory::Other);
}

TEST(CudaAllocator, SmallRequestsDoNotCutLargeBlocks) {
  LAB_REQUIRE_GPU();
  constexpr size_t kMiB = size_t{1} << 20;
  Allocator& alloc = cuda::caching_allocator(0);
  cuda::Stream stream;
  cuda::StreamGuard on(stream);
  char* large = static_cast<char*>(alloc.allocate(4 * kMiB, MemCategory::Other));
  alloc.deallocate(large, 4 * kMiB, MemCategory::Other);
  char* small = static_cast<char*>(alloc.allocate(4000, MemCategory::Other));
  EXPECT_TRUE(small < large || small >= large + 4 * kMiB) << "a small request cut a large block";
  alloc.deallocate(small, 4000, MemCategory::Other);
}

// Random requests and frees of every size on two streams: no two live blocks overlap, a block holds what was
// written to it until it is freed, the live bytes are the blocks' sizes, and once all is freed every segment the
// run made is whole again (its pieces merged back), so that emptying the cache gives all of them back.
TEST(CudaAllocator, RandomRequestsNeverOverlapAndFreedPiecesMergeBack) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  cuda::Stream streams[2];
  std::mt19937 rng(7);
  struct Live {
    char* ptr;
    size_t bytes;
    int stream;
    unsigned char fill;
  };
  const auto random_bytes = [&] {
    const int kind = static_cast<int>(rng() % 4);  // tiny, small, around the 1 MiB line, large
    const size_t limits[] = {2048, size_t{1} << 20, size_t{3} << 20, size_t{40} << 20};
    const size_t low = kind == 2 ? (size_t{1} << 20) - 4096 : 1;
    return low + rng() % (limits[kind] - low);
  };
  alloc.empty_cache();
  {
    std::vector<Live> live;
    const MemoryStats start = alloc.stats();
    const auto free_one = [&](size_t i) {
      const cuda::Stream& stream = streams[live[i].stream];
      cuda::StreamGuard on(stream);
      unsigned char first = 0, last = 0;  // read in the stream's order, after its memset
      const char* end = live[i].ptr + live[i].bytes - 1;
      ASSERT_EQ(cudaMemcpyAsync(&first, live[i].ptr, 1, cudaMemcpyDeviceToHost, stream.get()), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(&last, end, 1, cudaMemcpyDeviceToHost, stream.get()), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
      EXPECT_EQ(first, live[i].fill) << "a live block was overwritten";
      EXPECT_EQ(last, live[i].fill) << "a live block was overwritten";
      alloc.deallocate(live[i].ptr, live[i].bytes, MemCategory::Other);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    };
    for (int step = 0; step < 400; ++step) {
      if (live.empty() || rng() % 100 < 55) {
        const int s = static_cast<int>(rng() % 2);
        const size_t bytes = random_bytes();
        cuda::StreamGuard on(streams[s]);
        auto* ptr = static_cast<char*>(alloc.allocate(bytes, MemCategory::Other));
        for (const Live& other : live)
          ASSERT_TRUE(ptr + bytes <= other.ptr || other.ptr + other.bytes <= ptr) << "two live blocks overlap";
        const auto fill = static_cast<unsigned char>(step % 251);
        ASSERT_EQ(cudaMemsetAsync(ptr, fill, bytes, streams[s].get()), cudaSuccess);
        live.push_back({ptr, bytes, s, fill});
      } else {
        free_one(rng() % live.size());
      }
      int64_t blocks = 0;
      for (const Live& l : live) blocks += static_cast<int64_t>(cuda::cuda_block_size(l.bytes));
      // A block is its request rounded up to 512 bytes, or a whole piece too small to cut (under 512 bytes more).
      const int64_t held = alloc.stats().live_total - start.live_total;
      ASSERT_GE(held, blocks);
      ASSERT_LT(held, blocks + 512 * static_cast<int64_t>(live.size()) + 1);
    }
    while (!live.empty()) free_one(live.size() - 1);
    EXPECT_EQ(alloc.stats().live_total, start.live_total);
    EXPECT_GT(alloc.stats().system_allocs, start.system_allocs) << "the run made no segment of its own";
    alloc.empty_cache();
    EXPECT_EQ(alloc.stats().reserved, start.reserved) << "a segment of the run is still cut: a piece did not merge";
  }
}

TEST(CudaAllocator, AccountsLiveAndPeakBytesByCategory) {
  LAB_REQUIRE_GPU();
  const MemoryStats before = memory_stats(kGpu);
  const int64_t mib = int64_t{1} << 20;
  {
    MemoryScope scope(MemCategory::Activations);
    const Tensor a = Tensor::empty({mib / 4}, DType::F32, kGpu);  // exactly 1 MiB, a class of its own
    const MemoryStats during = memory_stats(kGpu);
    EXPECT_EQ(during.live_of(MemCategory::Activations), before.live_of(MemCategory::Activations) + mib);
    EXPECT_EQ(during.live_total, before.live_total + mib);
    EXPECT_GE(during.peak_of(MemCategory::Activations), during.live_of(MemCategory::Activations));
    EXPECT_GE(during.reserved, during.live_total);
    EXPECT_GE(during.peak_reserved, during.reserved);
  }
  const MemoryStats after = memory_stats(kGpu);
  EXPECT_EQ(after.live_of(MemCategory::Activations), before.live_of(MemCategory::Activations));
  EXPECT_GE(after.peak_of(MemCategory::Activations), before.live_of(MemCategory::Activations) + mib);
  EXPECT_GE(after.reserved, after.live_total + mib) << "the freed block stays cached";

  allocator_for(kGpu).reset_peak();
  const MemoryStats reset = memory_stats(kGpu);
  EXPECT_EQ(reset.peak_of(MemCategory::Activations), reset.live_of(MemCategory::Activations));
  EXPECT_EQ(reset.peak_total, reset.live_total);
}

TEST(CudaAllocator, BlocksAreReusedOnlyOnTheirOwnStream) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  const size_t bytes = 96 * 1024;
  void* on_default = alloc.allocate(bytes, MemCategory::Other);
  alloc.deallocate(on_default, bytes, MemCategory::Other);

  cuda::Stream side;
  void* on_side = nullptr;
  {
    cuda::StreamGuard guard(side);
    on_side = alloc.allocate(bytes, MemCategory::Other);
    EXPECT_NE(on_side, on_default) << "a block freed on the default stream was handed to another stream";
    alloc.deallocate(on_side, bytes, MemCategory::Other);
    void* again = alloc.allocate(bytes, MemCategory::Other);
    EXPECT_EQ(again, on_side) << "the side stream's own block is reused";
    alloc.deallocate(again, bytes, MemCategory::Other);
  }
  void* back = alloc.allocate(bytes, MemCategory::Other);
  EXPECT_EQ(back, on_default);
  alloc.deallocate(back, bytes, MemCategory::Other);
}

// The case record_stream exists for: stream B still has to read a tensor (held back here by a gate, as a
// long kernel would) when its owner, stream A, frees it and allocates again. Without the recorded use, A's
// next allocation of the same size gets the same block and overwrites it before B has read it.
TEST(CudaAllocator, RecordedStreamKeepsAFreedBlockUntilItsWorkIsDone) {
  LAB_REQUIRE_GPU();
  const int64_t n = 40000;  // a 160000-byte class of its own in this test
  const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
  cuda::Stream a, b;
  const Tensor seen = Tensor::zeros({n}, DType::F32, kGpu);  // what B reads, copied out when B runs
  // The zeros are written on the legacy stream, which a non-blocking stream does not wait for: done before B copies.
  cuda::synchronize();
  void* block = nullptr;
  StreamGate gate(b);
  {
    cuda::StreamGuard on_a(a);
    Tensor data = Tensor::from_floats(ones, {n}, kGpu);
    block = data.raw();
    {
      cuda::StreamGuard on_b(b);
      cuda::copy_async(seen.raw(), kGpu, data.raw(), kGpu, data.nbytes());  // queued behind the gate
    }
    cuda::record_stream(data, b);
    data = Tensor();  // freed by A while B's read is still queued

    const Tensor next = Tensor::empty({n}, DType::F32, kGpu);
    EXPECT_NE(next.raw(), block) << "a block still in use by another stream was handed out again";
    next.fill_(7.0f);
    a.synchronize();
  }
  gate.release();
  b.synchronize();
  EXPECT_EQ(seen.to_floats(), ones) << "stream B read memory that stream A had already reused";

  // B is done: the block is free again, for its owner A.
  cuda::StreamGuard on_a(a);
  const Tensor again = Tensor::empty({n}, DType::F32, kGpu);
  EXPECT_EQ(again.raw(), block);
}

TEST(CudaAllocator, RecordStreamOnTheOwnerIsANoOpAndWrappedMemoryIsRejected) {
  LAB_REQUIRE_GPU();
  cuda::Stream a;
  cuda::StreamGuard on_a(a);
  void* block = nullptr;
  {
    const Tensor t = Tensor::empty({3000}, DType::F32, kGpu);
    block = t.raw();
    cuda::record_stream(t, a);
  }
  const Tensor reused = Tensor::empty({3000}, DType::F32, kGpu);
  EXPECT_EQ(reused.raw(), block) << "the owner's own use must not delay reuse";

  // Device memory the allocator did not hand out as a block (here: inside one, as a foreign buffer would be).
  const Tensor wrapped = Tensor::wrap(reused.data<float>() + 1, {10}, DType::F32, kGpu, [] {});
  testing::expect_error([&] { cuda::record_stream(wrapped, a); }, ErrorKind::InvalidArgument,
                        {"record_stream", "caching allocator"});
}

// A destroyed stream's cached blocks serve every other stream, and so does a block it still owned when it
// died; without that, each short-lived stream would leave its blocks cached forever.
TEST(CudaAllocator, BlocksOfADestroyedStreamServeOtherStreams) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  alloc.empty_cache();
  const size_t bytes = (size_t{5} << 20) + 12345;  // the 6 MiB class, used nowhere else in these tests
  void* cached = nullptr;
  void* still_live = nullptr;
  {
    cuda::Stream short_lived;
    cuda::StreamGuard on(short_lived);
    cached = alloc.allocate(bytes, MemCategory::Other);
    still_live = alloc.allocate(bytes, MemCategory::Other);
    alloc.deallocate(cached, bytes, MemCategory::Other);
  }
  alloc.deallocate(still_live, bytes, MemCategory::Other);  // its owner is gone
  const int64_t mallocs = alloc.stats().system_allocs;
  void* first = alloc.allocate(bytes, MemCategory::Other);  // on the default stream
  void* second = alloc.allocate(bytes, MemCategory::Other);
  EXPECT_TRUE((first == cached && second == still_live) || (first == still_live && second == cached));
  EXPECT_EQ(alloc.stats().system_allocs, mallocs) << "the destroyed stream's blocks were not reused";
  alloc.deallocate(first, bytes, MemCategory::Other);
  alloc.deallocate(second, bytes, MemCategory::Other);
}

TEST(CudaAllocator, ShortLivedStreamsDoNotGrowTheCache) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  const size_t bytes = size_t{3} << 20;
  // A runtime may hand a new stream the handle of one just destroyed (the emulator does), which would hide a
  // leak: each round ends by creating a stream that stays alive and takes that handle, so every round's
  // stream is new to the allocator.
  std::vector<cuda::Stream> alive;
  const auto round = [&] {
    {
      cuda::Stream stream;
      cuda::StreamGuard on(stream);
      void* p = alloc.allocate(bytes, MemCategory::Other);
      alloc.deallocate(p, bytes, MemCategory::Other);
    }
    alive.emplace_back();
  };
  round();
  const int64_t reserved = alloc.stats().reserved;
  for (int i = 0; i < 20; ++i) round();
  EXPECT_EQ(alloc.stats().reserved, reserved) << "each destroyed stream left a block behind";
}

TEST(CudaAllocator, EmptyCacheReturnsCachedBlocks) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  cuda::Stream stream;
  cuda::StreamGuard on(stream);
  alloc.empty_cache();
  const int64_t before = alloc.stats().reserved;
  void* p = alloc.allocate(size_t{8} << 20, MemCategory::Workspace);
  alloc.deallocate(p, size_t{8} << 20, MemCategory::Workspace);
  EXPECT_GT(alloc.stats().reserved, alloc.stats().live_total);
  alloc.empty_cache();
  const MemoryStats s = alloc.stats();
  // Segments of which anything is live stay (another test's tensors may hold some); the freed one is gone.
  EXPECT_EQ(s.reserved, before) << "the freed segment is still cached";
  const int64_t mallocs = s.system_allocs;
  void* q = alloc.allocate(size_t{8} << 20, MemCategory::Workspace);
  EXPECT_EQ(alloc.stats().system_allocs, mallocs + 1) << "after empty_cache a new block comes from cudaMalloc";
  alloc.deallocate(q, size_t{8} << 20, MemCategory::Workspace);
}

TEST(CudaAllocator, OutOfMemoryIsAClearErrorAndTheAllocatorStillWorks) {
  LAB_REQUIRE_GPU();
  Allocator& alloc = cuda::caching_allocator(0);
  const size_t huge = size_t{1} << 50;  // 1 PiB: no GPU has it
  const std::string message =
      testing::expect_error([&] { alloc.allocate(huge, MemCategory::Activations); }, ErrorKind::Cuda,
                            {"out of memory", "cuda:0", std::to_string(huge), "live", "reserved"});
  EXPECT_FALSE(message.empty());
  const Tensor t = Tensor::from_floats(std::vector<float>{1, 2, 3}, {3}, kGpu);
  EXPECT_EQ(t.to_floats(), (std::vector<float>{1, 2, 3}));
}

// Stream-ordered reuse: a block freed on the host while a copy queued before the free still reads it is handed to
// the next request at once, cut smaller, and the copy still reads what was there (on the sanitized emulation build,
// where freed blocks are marked as not addressable, the mark comes after the copy in the stream's order: no report).
TEST(CudaAllocator, AQueuedReadOfABlockFreedAndCutAgainStillSeesItsData) {
  LAB_REQUIRE_GPU();
  const int64_t n = 1000;
  cuda::Stream stream;
  cuda::StreamGuard on(stream);
  const std::vector<float> values(static_cast<size_t>(n), 3.0f);
  Tensor source = Tensor::from_floats(values, {n}, kGpu);
  const Tensor seen = Tensor::zeros({n}, DType::F32, kGpu);
  stream.synchronize();
  const void* block = source.raw();
  {
    StreamGate gate(stream);
    cuda::copy_async(seen.raw(), kGpu, source.raw(), kGpu, source.nbytes());  // queued behind the gate
    source = Tensor();
    const Tensor smaller = Tensor::empty({n / 4}, DType::F32, kGpu);
    EXPECT_EQ(smaller.raw(), block) << "the freed block was not reused at once on its own stream";
    gate.release();
    stream.synchronize();  // before the gate goes: its host function reads the gate's flag until then
  }
  EXPECT_EQ(seen.to_floats(), values);
}

#if defined(LAB_CUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
// The sanitized emulation build (common/cuda/block_marks.h): the bytes of a block past its request and a freed block
// are not addressable, so writing one byte past a tensor's end, or into a freed tensor, is an AddressSanitizer
// report, though the bytes lie inside the segment that cudaMalloc returned.
TEST(CudaAllocatorDeathTest, AWriteOnePastATensorsEndIsAReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const Tensor t = Tensor::empty({1000}, DType::F32, kGpu);  // 4000 bytes of a 4096-byte block
        static_cast<void>(cudaMemset(t.raw(), 0, 4001));
        static_cast<void>(cudaDeviceSynchronize());
      },
      "use-after-poison");
}

TEST(CudaAllocatorDeathTest, AWriteIntoAFreedTensorIsAReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* freed = nullptr;
        {
          const Tensor t = Tensor::empty({1000}, DType::F32, kGpu);
          freed = t.raw();
        }
        static_cast<void>(cudaMemset(freed, 0, 16));
        static_cast<void>(cudaDeviceSynchronize());
      },
      "use-after-poison");
}

// The marks never report a legal use. A block handed out again while its owner stream has not yet reached the marks
// of its earlier free is addressable at once, from another stream too (a copy there is legal as soon as the
// allocation returns), and stays so when the owner stream then makes those marks.
TEST(CudaAllocator, ABlockReusedBeforeItsOwnerReachedTheFreeMarkStaysAddressable) {
  LAB_REQUIRE_GPU();
  const int64_t n = 1000;
  cuda::Stream owner;
  cuda::Stream other;
  cuda::StreamGuard on(owner);
  Tensor first = Tensor::zeros({n}, DType::F32, kGpu);
  owner.synchronize();
  const void* block = first.raw();
  StreamGate gate(owner);
  first = Tensor();  // its marks wait behind the gate
  const Tensor second = Tensor::empty({n}, DType::F32, kGpu);
  ASSERT_EQ(second.raw(), block);
  ASSERT_EQ(cudaMemsetAsync(second.raw(), 0, second.nbytes(), other.get()), cudaSuccess);
  other.synchronize();
  gate.release();
  owner.synchronize();  // the marks of the free have been made now
  ASSERT_EQ(cudaMemsetAsync(second.raw(), 0, second.nbytes(), owner.get()), cudaSuccess);
  owner.synchronize();
  EXPECT_EQ(second.to_floats(), std::vector<float>(static_cast<size_t>(n), 0.0f));
}
#endif

// ---------------------------------------------------------------- private pools

const void* address(const Tensor& t) {
  return t.storage()->data();
}

TEST(CudaAllocatorPool, APoolsBlocksServeThatPoolOnly) {
  LAB_REQUIRE_GPU();
  const int pool = cuda::create_private_pool(0);
  const void* in_pool = nullptr;
  {
    const cuda::PoolScope scope(0, pool);
    in_pool = address(Tensor::empty({3000}, DType::F32, kGpu));  // freed at once: back to the pool
  }
  const Tensor outside = Tensor::empty({3000}, DType::F32, kGpu);
  EXPECT_NE(address(outside), in_pool) << "an allocation outside the pool received the pool's block";
  {
    const cuda::PoolScope scope(0, pool);
    EXPECT_EQ(address(Tensor::empty({3000}, DType::F32, kGpu)), in_pool);
  }
  cuda::release_private_pool(0, pool);
  testing::expect_error([&] { const cuda::PoolScope scope(0, pool); }, ErrorKind::InvalidArgument, {"no pool"});
}

TEST(CudaAllocatorPool, TheSameSequenceGetsTheSameAddressesAndNoNewMemory) {
  LAB_REQUIRE_GPU();
  const int pool = cuda::create_private_pool(0);
  // A step's pattern in miniature: buffers of several sizes, some freed before others are allocated.
  const auto run = [&] {
    const cuda::PoolScope scope(0, pool);
    std::vector<const void*> seen;
    Tensor a = Tensor::empty({1000}, DType::F32, kGpu), b = Tensor::empty({5000}, DType::F32, kGpu);
    seen.push_back(address(a));
    seen.push_back(address(b));
    a = Tensor();
    const Tensor c = Tensor::empty({1000}, DType::F32, kGpu), d = Tensor::empty({20000}, DType::F32, kGpu);
    seen.push_back(address(c));
    seen.push_back(address(d));
    return seen;
  };
  const std::vector<const void*> first = run();
  const int64_t system_allocs = memory_stats(kGpu).system_allocs;
  EXPECT_EQ(run(), first);
  EXPECT_EQ(memory_stats(kGpu).system_allocs, system_allocs) << "the second run allocated device memory";
  cuda::release_private_pool(0, pool);
}

}  // namespace
}  // namespace lab
