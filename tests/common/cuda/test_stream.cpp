// Streams, events and pinned memory: the current stream and its guard, ops queued on the current stream,
// ordering across streams with events, event timing (and the device clock's marks), and asynchronous copies from
// pinned buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>
#include <vector>

#include "common/core/device_clock.h"
#include "common/core/tensor.h"
#include "common/cuda/check.h"
#include "common/cuda/pinned.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#include "common/ops/gelu.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/cuda/stream_gate.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using test::kGpu;
using test::StreamGate;

TEST(CudaStream, GuardSwitchesTheCurrentStreamAndRestoresIt) {
  LAB_REQUIRE_GPU();
  EXPECT_EQ(cuda::current_stream(), cudaStreamLegacy);
  cuda::Stream side;
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(), side.get());
    EXPECT_EQ(cuda::current_stream(0), side.get());
  }
  EXPECT_EQ(cuda::current_stream(), cudaStreamLegacy);
}

TEST(CudaStream, OpsRunOnTheCurrentStream) {
  LAB_REQUIRE_GPU();
  const Tensor x = Tensor::from_floats(std::vector<float>(1000, 1.0f), {1000}, kGpu);
  const Tensor out = Tensor::zeros({1000}, DType::F32, kGpu);
  cuda::PinnedBuffer seen(out.nbytes());  // allocated before the gate: a pinned allocation waits for the device
  // The kernel is loaded before the gate too: CUDA loads a kernel at its first launch (lazy loading) and may
  // synchronise the device to do it, which would wait for the gated stream forever (it hung on an H100 and an
  // H200; the emulator models the load and reports the deadlock).
  ops::gelu_forward(Tensor::empty({1000}, DType::F32, kGpu), x);
  CUDA_CHECK(cudaDeviceSynchronize());
  cuda::Stream side;
  StreamGate gate(side);
  {
    cuda::StreamGuard guard(side);
    ops::gelu_forward(out, x);  // queued behind the gate
  }
  // The side stream is non-blocking, so this read on the default stream does not wait for it: the GELU
  // cannot have run yet if it went to the side stream. The read goes to pinned memory: a copy into pageable
  // memory (to_floats) is completed by the runtime's host-function thread, which the gate holds, and would
  // never return (it hung on an H100; the emulator reports it as a deadlock).
  cuda::copy_async(seen.data(), Device::cpu(), out.raw(), kGpu, out.nbytes());
  CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream()));
  const auto values = seen.as<float>();
  EXPECT_EQ(std::vector<float>(values.begin(), values.end()), std::vector<float>(1000, 0.0f))
      << "the op did not wait on the current stream";
  EXPECT_FALSE(side.query());
  gate.release();
  side.synchronize();
  EXPECT_TRUE(side.query());
  EXPECT_NEAR(out.to_floats()[0], 0.8411920f, 1e-6f);  // gelu(1)
}

TEST(CudaStream, EventOrdersWorkAcrossStreams) {
  LAB_REQUIRE_GPU();
  const size_t n = size_t{1} << 22;
  cuda::PinnedBuffer source(n * sizeof(float)), result(n * sizeof(float));
  auto src = source.as<float>();
  std::iota(src.begin(), src.end(), 0.0f);
  const Tensor device = Tensor::empty({static_cast<int64_t>(n)}, DType::F32, kGpu);

  cuda::Stream producer, consumer;
  cuda::Event uploaded(false);
  {
    cuda::StreamGuard on(producer);
    cuda::copy_async(device.raw(), kGpu, source.data(), Device::cpu(), source.bytes());
    uploaded.record();
  }
  consumer.wait(uploaded);
  {
    cuda::StreamGuard on(consumer);
    cuda::copy_async(result.data(), Device::cpu(), device.raw(), kGpu, result.bytes());
  }
  consumer.synchronize();
  EXPECT_TRUE(uploaded.query());
  const auto back = result.as<float>();
  EXPECT_TRUE(std::equal(back.begin(), back.end(), src.begin()));
}

TEST(CudaStream, EventsTimeGpuWork) {
  LAB_REQUIRE_GPU();
  cuda::Event start, end;
  start.record();
  const Tensor t = Tensor::zeros({int64_t{1} << 24}, DType::F32, kGpu);  // a 64 MiB memset
  end.record();
  const float ms = cuda::elapsed_ms(start, end);
  EXPECT_TRUE(std::isfinite(ms));
  EXPECT_GE(ms, 0.0f);
  EXPECT_TRUE(end.query());
  cuda::Event untimed(false);
  untimed.record();
  testing::expect_error([&] { cuda::elapsed_ms(start, untimed); }, ErrorKind::InvalidArgument, {"timing"});
}

// The device clock's marks are events on the current stream: marking does not wait for the stream, and the span
// between two marks is the device's time between them (here a stream held for 30 ms by the host), read afterwards.
TEST(DeviceClockOnCuda, MarksTheStreamWithoutWaitingForIt) {
  LAB_REQUIRE_GPU();
  cuda::Stream stream;
  const cuda::StreamGuard on(stream);
  DeviceClock clock(kGpu);
  const int start = clock.mark();
  StreamGate gate(stream);
  const int end = clock.mark();
  EXPECT_FALSE(stream.query()) << "marking waited for the stream";
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  gate.release();
  EXPECT_GE(clock.seconds(start, end), 0.025);
  // After clear() the events are recorded again, from mark 0.
  clock.clear();
  EXPECT_EQ(clock.mark(), 0);
  const Tensor t = Tensor::zeros({int64_t{1} << 20}, DType::F32, kGpu);
  EXPECT_EQ(clock.mark(), 1);
  EXPECT_GE(clock.seconds(0, 1), 0.0);
}

// query() answers "not ready" without disturbing the thread's error state: an error left pending by an
// unrelated call is still there for the check that owns it, and the "not ready" itself is not left behind.
TEST(CudaStream, QueryOfUnfinishedWorkLeavesOtherErrorsPending) {
  LAB_REQUIRE_GPU();
  cuda::Stream side;
  StreamGate gate(side);
  cuda::Event marker(false);
  marker.record(side);
  ASSERT_EQ(cudaPeekAtLastError(), cudaSuccess);

  EXPECT_FALSE(side.query());
  EXPECT_FALSE(marker.query());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "a \"not ready\" answer was left as the last error";

  // A non-sticky error of an unrelated call (selecting a GPU that does not exist), not yet checked.
  ASSERT_EQ(cudaSetDevice(cuda::device_count()), cudaErrorInvalidDevice);
  EXPECT_FALSE(side.query());
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice) << "Stream::query swallowed an error it did not cause";
  EXPECT_FALSE(marker.query());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice) << "Event::query swallowed an error it did not cause";

  gate.release();
  side.synchronize();
  EXPECT_TRUE(side.query());
  EXPECT_TRUE(marker.query());
}

TEST(CudaStream, MovedStreamKeepsItsHandle) {
  LAB_REQUIRE_GPU();
  cuda::Stream a;
  const cudaStream_t handle = a.get();
  cuda::Stream b(std::move(a));
  EXPECT_EQ(b.get(), handle);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is documented
  EXPECT_EQ(b.device(), 0);
}

TEST(CudaPinned, BufferOwnsPinnedMemory) {
  LAB_REQUIRE_GPU();
  cuda::PinnedBuffer buffer(1000 * sizeof(float));
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.bytes(), 1000 * sizeof(float));
  EXPECT_EQ(buffer.as<float>().size(), 1000u);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, buffer.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "page-locked host memory";

  void* const data = buffer.data();
  cuda::PinnedBuffer moved = std::move(buffer);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(buffer.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(buffer.bytes(), 0u);
  EXPECT_EQ(cuda::PinnedBuffer(0).data(), nullptr);
}

TEST(CudaPinned, RoundTripThroughTheGpu) {
  LAB_REQUIRE_GPU();
  cuda::PinnedBuffer up(4097 * sizeof(int32_t)), down(4097 * sizeof(int32_t));
  auto ids = up.as<int32_t>();
  std::iota(ids.begin(), ids.end(), -7);
  const Tensor device = Tensor::empty({4097}, DType::I32, kGpu);
  cuda::copy_async(device.raw(), kGpu, up.data(), Device::cpu(), up.bytes());
  cuda::copy_async(down.data(), Device::cpu(), device.raw(), kGpu, down.bytes());
  cuda::Event done;
  done.record();
  done.synchronize();
  const auto back = down.as<int32_t>();
  EXPECT_TRUE(std::equal(back.begin(), back.end(), ids.begin()));
  EXPECT_EQ(device.to_ints()[4096], 4089);
}

}  // namespace
}  // namespace lab
