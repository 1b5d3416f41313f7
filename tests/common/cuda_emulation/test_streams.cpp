// Streams and events: in-order queues, copies synchronous to the host only from and to pageable memory,
// events between streams, the legacy default stream against blocking and non-blocking streams, timing, and
// the implicit synchronisations: host functions one at a time, a copy into pageable memory behind a running
// host function, pinned allocations behind all queued work, a kernel's first launch (lazy loading) behind all of
// it, and the deadlock a gated stream makes of them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

class Streams : public EmulationTest {
 protected:
  void SetUp() override {
    EmulationTest::SetUp();
    ASSERT_EQ(cudaStreamCreateWithFlags(&blocking_, cudaStreamDefault), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&non_blocking_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamDestroy(blocking_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(non_blocking_), cudaSuccess);
    EmulationTest::TearDown();
  }
  cudaStream_t blocking_ = nullptr;
  cudaStream_t non_blocking_ = nullptr;
};

void set_flag(void* flag) {
  static_cast<std::atomic<int>*>(flag)->store(1);
}

// Sleeps, then writes 42 into the first int of the buffer it is given.
void slow_write(void* buffer) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  static_cast<int*>(buffer)[0] = 42;
}

TEST_F(Streams, ACopyWaitsForTheSlowHostFunctionBeforeIt) {
  PinnedBuffer<int> source(1024), result(1024);
  source[0] = 7;
  result[0] = 0;
  DeviceBuffer<int> device(1024);
  ASSERT_EQ(cudaLaunchHostFunc(non_blocking_, slow_write, source.get()), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device.get(), source.get(), 1024 * sizeof(int), cudaMemcpyHostToDevice, non_blocking_),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(result.get(), device.get(), 1024 * sizeof(int), cudaMemcpyDeviceToHost, non_blocking_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(non_blocking_), cudaSuccess);
  EXPECT_EQ(result[0], 42) << "the copy ran before the host function queued ahead of it";
}

TEST_F(Streams, PinnedCopiesReturnAtOncePageableCopiesWait) {
  PinnedBuffer<int> pinned(256);
  std::vector<int> pageable(256, 5);
  DeviceBuffer<int> device(256);
  std::atomic<int> done{0};
  {
    StreamGate gate(non_blocking_);
    ASSERT_EQ(cudaLaunchHostFunc(non_blocking_, set_flag, &done), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(device.get(), pinned.get(), 256 * sizeof(int), cudaMemcpyDefault, non_blocking_),
              cudaSuccess);
    // Returned while the stream is still held: the copy is queued, not done.
    EXPECT_EQ(cudaStreamQuery(non_blocking_), cudaErrorNotReady);
    EXPECT_EQ(done.load(), 0);
    gate.open();
    // From pageable memory the call returns only once the copy has run, so everything before it has too.
    ASSERT_EQ(cudaMemcpyAsync(device.get(), pageable.data(), 256 * sizeof(int), cudaMemcpyDefault, non_blocking_),
              cudaSuccess);
    EXPECT_EQ(done.load(), 1);
  }
  EXPECT_EQ(device.download()[255], 5);
}

TEST_F(Streams, AnEventOrdersWorkAcrossStreams) {
  cudaEvent_t ready = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ready), cudaSuccess);  // never recorded: nothing to wait for
  std::atomic<int> consumed{0};
  {
    StreamGate gate(blocking_);
    ASSERT_EQ(cudaEventRecord(ready, blocking_), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(non_blocking_, ready, 0), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(non_blocking_, set_flag, &consumed), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // time enough for a consumer that does not wait
    EXPECT_EQ(cudaEventQuery(ready), cudaErrorNotReady);
    EXPECT_EQ(cudaStreamQuery(non_blocking_), cudaErrorNotReady);
    EXPECT_EQ(consumed.load(), 0);
  }
  ASSERT_EQ(cudaStreamSynchronize(non_blocking_), cudaSuccess);
  EXPECT_EQ(consumed.load(), 1);
  EXPECT_EQ(cudaEventQuery(ready), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(non_blocking_, ready, 1), cudaErrorInvalidValue);
  ASSERT_EQ(cudaEventDestroy(ready), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ready), cudaErrorInvalidResourceHandle);
}

// The legacy default stream waits for blocking streams (and they for it); non-blocking streams stay apart.
TEST_F(Streams, TheLegacyStreamOrdersItselfWithBlockingStreamsOnly) {
  DeviceBuffer<int> value(std::vector<int>{0});
  PinnedBuffer<int> seen(1);
  {
    // Device work and a copy into pinned memory, not a host function: host functions run one at a time, so
    // one on the legacy stream would wait for the gate's whatever the streams' rules say.
    StreamGate held(non_blocking_);
    ASSERT_EQ(cudaMemsetAsync(value.get(), 1, sizeof(int), cudaStreamLegacy), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(seen.get(), value.get(), sizeof(int), cudaMemcpyDeviceToHost, cudaStreamLegacy),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);  // does not wait for the held stream
    EXPECT_EQ(seen[0], 0x01010101);
  }
  std::atomic<int> legacy_ran{0};
  {
    StreamGate held(blocking_);
    ASSERT_EQ(cudaLaunchHostFunc(cudaStreamLegacy, set_flag, &legacy_ran), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(legacy_ran.load(), 0) << "legacy work ran before the blocking stream's earlier work";
    EXPECT_EQ(cudaStreamQuery(cudaStreamLegacy), cudaErrorNotReady);
  }
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(legacy_ran.load(), 1);

  std::atomic<int> blocking_ran{0};
  {
    StreamGate held(cudaStreamLegacy);
    ASSERT_EQ(cudaLaunchHostFunc(blocking_, set_flag, &blocking_ran), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(blocking_ran.load(), 0) << "blocking-stream work ran before the legacy stream's earlier work";
  }
  ASSERT_EQ(cudaStreamSynchronize(blocking_), cudaSuccess);
  EXPECT_EQ(blocking_ran.load(), 1);
}

TEST_F(Streams, EventsTimeFromWhenTheirRecordRan) {
  cudaEvent_t start = nullptr, end = nullptr, untimed = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // not recorded yet
  PinnedBuffer<int> scratch(1);
  ASSERT_EQ(cudaEventRecord(start, blocking_), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(blocking_, slow_write, scratch.get()), cudaSuccess);  // sleeps 50 ms
  ASSERT_EQ(cudaEventRecord(end, blocking_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, blocking_), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 50.0f) << "the records ran on either side of a 50 ms sleep";
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  for (cudaEvent_t e : {start, end, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
}

__global__ void increment_kernel(int* value) {
  if (threadIdx.x == 0) *value += 1;
}

TEST_F(Streams, KernelsRunInStreamOrder) {
  DeviceBuffer<int> value(std::vector<int>{0});
  PinnedBuffer<int> seen(1);
  {
    DeviceBuffer<int> warm(std::vector<int>{0});  // the kernel's first launch loads it (see the test below)
    ASSERT_EQ(launch(increment_kernel, 1, 32, 0, non_blocking_, warm.get()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(non_blocking_), cudaSuccess);
    StreamGate gate(non_blocking_);
    for (int i = 0; i < 5; ++i) ASSERT_EQ(launch(increment_kernel, 1, 32, 0, non_blocking_, value.get()), cudaSuccess);
    // Read into pinned memory: a copy into pageable memory would wait for the gate (see the tests below).
    ASSERT_EQ(cudaMemcpyAsync(seen.get(), value.get(), sizeof(int), cudaMemcpyDeviceToHost, blocking_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(blocking_), cudaSuccess);
    EXPECT_EQ(seen[0], 0) << "a kernel ran before the host function queued ahead of it";
  }
  ASSERT_EQ(cudaStreamSynchronize(non_blocking_), cudaSuccess);
  EXPECT_EQ(value.download()[0], 5);
}

// Opens `gate` after `delay` on a thread of its own, and says whether it has.
class DelayedOpener {
 public:
  DelayedOpener(StreamGate& gate, std::chrono::milliseconds delay)
      : thread_([this, &gate, delay] {
          std::this_thread::sleep_for(delay);
          opened_.store(true);
          gate.open();
        }) {}
  ~DelayedOpener() { thread_.join(); }
  bool opened() const { return opened_.load(); }

 private:
  std::atomic<bool> opened_{false};
  std::thread thread_;
};

// CUDA may serialise host functions of unordered streams; the emulator always does, so code that needs two
// host functions to run at once (one waiting for the other) hangs here as it may on a GPU.
TEST_F(Streams, HostFunctionsRunOneAtATime) {
  std::atomic<int> second_ran{0};
  StreamGate gate(non_blocking_);
  gate.wait_until_holding();
  ASSERT_EQ(cudaLaunchHostFunc(blocking_, set_flag, &second_ran), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(second_ran.load(), 0) << "a host function ran while another one was still running";
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(blocking_), cudaSuccess);
  EXPECT_EQ(second_ran.load(), 1);
}

// A synchronous copy from the device into pageable memory completes on the runtime's host-function thread:
// it waits for a host function running on another stream, even a non-blocking one. A copy from pageable
// memory to the device, or into pinned memory, does not.
TEST_F(Streams, ACopyIntoPageableMemoryWaitsForARunningHostFunction) {
  DeviceBuffer<int> device(std::vector<int>{3});
  PinnedBuffer<int> pinned(1);
  std::vector<int> pageable{0};
  StreamGate gate(non_blocking_);
  gate.wait_until_holding();
  DelayedOpener opener(gate, std::chrono::milliseconds(200));
  ASSERT_EQ(cudaMemcpy(device.get(), pageable.data(), sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned.get(), device.get(), sizeof(int), cudaMemcpyDeviceToHost, blocking_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(blocking_), cudaSuccess);
  EXPECT_FALSE(opener.opened()) << "a copy into pinned memory, or from pageable memory, waited for the host function";
  pageable[0] = 7;
  ASSERT_EQ(cudaMemcpy(pageable.data(), device.get(), sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(opener.opened()) << "a copy into pageable memory returned while a host function was running";
  EXPECT_EQ(pageable[0], 0);
}

// A page-locked allocation is an implicit synchronisation: it returns once the work queued before it, on
// every stream, has run.
TEST_F(Streams, APinnedAllocationWaitsForQueuedWork) {
  StreamGate gate(non_blocking_);
  DelayedOpener opener(gate, std::chrono::milliseconds(200));
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 64), cudaSuccess);
  EXPECT_TRUE(opener.opened()) << "cudaMallocHost returned while work queued before it was held";
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// The deadlock a real GPU showed: a host function that waits for the host program, which meanwhile copies
// into pageable memory. On a GPU the copy never returns; here the wait is watched, and the process ends
// with a message naming the call and the host function.
TEST_F(Streams, AHostFunctionWaitingForTheHostIsANamedDeadlock) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("LAB_EMU_DEADLOCK_SECONDS", "1", 1);
  EXPECT_DEATH(
      {
        DeviceBuffer<int> device(std::vector<int>{1});
        StreamGate gate(non_blocking_);  // opened only after the copy below, which never comes back
        gate.wait_until_holding();
        std::vector<int> pageable(1);
        cudaMemcpy(pageable.data(), device.get(), sizeof(int), cudaMemcpyDeviceToHost);
      },
      "deadlock: cudaMemcpy\\(Async\\) from or to pageable host memory has waited 1 s, and all that time host "
      "function .* has not returned");
  unsetenv("LAB_EMU_DEADLOCK_SECONDS");
}

__global__ void never_launched_kernel(int* value) {
  if (threadIdx.x == 0) *value = 1;
}

// Lazy loading: the first launch of a kernel loads it and may synchronise the device, so launching a kernel for
// the first time while a host function holds a stream never returns (an H100 and an H200 hung so). Here the
// load waits for the device's work, watched, and the process ends naming the load and the host function.
TEST_F(Streams, TheFirstLaunchOfAKernelBehindAHeldStreamIsANamedDeadlock) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("LAB_EMU_DEADLOCK_SECONDS", "1", 1);
  EXPECT_DEATH(
      {
        DeviceBuffer<int> value(std::vector<int>{0});
        StreamGate gate(non_blocking_);  // opened only after the launch below, which never comes back
        gate.wait_until_holding();
        launch(never_launched_kernel, 1, 32, 0, blocking_, value.get());
      },
      "deadlock: loading kernel test_kernel at its first use \\(lazy loading.*has waited 1 s, and all that time "
      "host function .* has not returned");
  unsetenv("LAB_EMU_DEADLOCK_SECONDS");
}

TEST_F(Streams, HandlesAreChecked) {
  cudaStream_t gone = nullptr;
  ASSERT_EQ(cudaStreamCreate(&gone), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(gone), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(gone), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(gone), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamCreateWithFlags(&gone, 0x8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventCreateWithFlags(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLaunchHostFunc(blocking_, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamQuery(blocking_), cudaSuccess);
}

void announce_after_a_while(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "the queued host function ran\n");
}

// A death test's child: queues announce_after_a_while on `stream` and exits at once.
[[noreturn]] void queue_announcement_and_exit(cudaStream_t stream) {
  cudaLaunchHostFunc(stream, announce_after_a_while, nullptr);
  std::exit(0);
}

// At exit the emulator finishes the work still queued before the process ends, so that it never runs while the
// program's statics are destroyed (nor is reported as leaked). The child, a fresh process (gtest's threadsafe
// style re-executes this program), queues a slow host function and exits at once: its line must appear.
TEST_F(Streams, WorkStillQueuedAtExitRunsBeforeTheProcessEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(queue_announcement_and_exit(non_blocking_), ::testing::ExitedWithCode(0), "the queued host function ran");
}

// A forked child (gtest's fast style) has the parent's queues but not their threads: exiting, it must not wait
// for them (it would wait forever).
TEST_F(Streams, AForkedChildExitsWithoutWaitingForItsParentsStreams) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(queue_announcement_and_exit(non_blocking_), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace lab::cuda::emu::test
