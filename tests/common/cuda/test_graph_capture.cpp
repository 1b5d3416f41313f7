// Stream capture and CUDA graphs, as the CUDA runtime defines them (label cuda: under the emulator, whose
// capture support this pins, and on a GPU, where the same calls must give the same answers):
// - the work queued on a capturing stream runs only when the graph is launched, again at every launch, and on
//   the memory it was captured with, so new inputs reach a replay through the same buffers;
// - what a capture cannot contain is refused with CUDA's error and invalidates the capture, so that ending it
//   says so: an allocation, a synchronisation with the capturing stream, a wait for an event recorded outside,
//   a query of an event recorded inside;
// - another stream joins the capture by waiting for one of its events (a fork): its work is part of the graph
//   once the capture's origin waits for it again (a join), and a fork never joined fails the capture.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "common/core/device.h"
#include "common/core/tensor.h"
#include "common/cuda/stream.h"
#include "common/ops/residual.h"

namespace lab {
namespace {

class GraphCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
    stream_.emplace();
  }
  void TearDown() override { cudaGetLastError(); }  // the refused calls' errors are not the next test's

  // Begins a capture, runs `illegal`, expects `error` from it, and expects the capture to end invalidated.
  template <typename Call>
  void expect_refused(Call&& illegal, cudaError_t error) {
    ASSERT_EQ(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(illegal(), error) << cudaGetErrorName(error);
    cudaStreamCaptureStatus status{};
    EXPECT_EQ(cudaStreamIsCapturing(stream_->get(), &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_->get(), &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    cudaGetLastError();
  }

  std::optional<cuda::Stream> stream_;
};

TEST_F(GraphCapture, TheGraphRunsTheCapturedWorkAtEveryLaunchOnTheSameBuffers) {
  const Device gpu = Device::cuda();
  const Tensor a = Tensor::from_floats(std::vector<float>{1, 2, 3, 4}, {4}, gpu);
  const Tensor b = Tensor::from_floats(std::vector<float>{10, 20, 30, 40}, {4}, gpu);
  const Tensor out = Tensor::zeros({4}, DType::F32, gpu);
  cudaGraph_t graph = nullptr;
  {
    const cuda::StreamGuard on(*stream_);
    ASSERT_EQ(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeGlobal), cudaSuccess);
    cudaStreamCaptureStatus status{};
    ASSERT_EQ(cudaStreamIsCapturing(stream_->get(), &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusActive);
    ops::residual_forward(out, a, b);  // out = a + b: one kernel, recorded
    ASSERT_EQ(cudaStreamEndCapture(stream_->get(), &graph), cudaSuccess);
  }
  stream_->synchronize();
  EXPECT_EQ(out.to_floats(), std::vector<float>(4, 0.0f)) << "captured work ran during the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_->get()), cudaSuccess);
  stream_->synchronize();
  EXPECT_EQ(out.to_floats(), (std::vector<float>{11, 22, 33, 44}));
  // New inputs in the same buffer: the next launch reads them.
  a.copy_from(Tensor::from_floats(std::vector<float>{5, 6, 7, 8}, {4}));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_->get()), cudaSuccess);
  stream_->synchronize();
  EXPECT_EQ(out.to_floats(), (std::vector<float>{15, 26, 37, 48}));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(GraphCapture, AnAllocationDuringCaptureIsRefused) {
  void* p = nullptr;
  expect_refused([&] { return cudaMalloc(&p, 1024); }, cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(p, nullptr);
}

TEST_F(GraphCapture, SynchronisingWithTheCapturingStreamIsRefused) {
  expect_refused([&] { return cudaStreamSynchronize(stream_->get()); }, cudaErrorStreamCaptureUnsupported);
  expect_refused([&] { return cudaStreamQuery(stream_->get()); }, cudaErrorStreamCaptureUnsupported);
}

TEST_F(GraphCapture, WaitingForAnEventRecordedOutsideTheCaptureIsRefused) {
  cuda::Stream other;
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, other.get()), cudaSuccess);
  expect_refused([&] { return cudaStreamWaitEvent(stream_->get(), event, 0); }, cudaErrorStreamCaptureIsolation);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(GraphCapture, AnEventRecordedInTheCaptureOrdersItsWork) {
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, stream_->get()), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(stream_->get(), event, 0), cudaSuccess);  // inside the same capture: allowed
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_->get(), &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

// The side stream waits for the origin's event (it joins the capture), computes c = a + b, and the origin waits for
// it before out = c + a: the graph holds both, in order, and runs them at each launch; the side stream's
// capture ends with the origin's.
TEST_F(GraphCapture, AStreamForkedIntoTheCaptureIsPartOfTheGraphOnceJoinedBack) {
  const Device gpu = Device::cuda();
  const Tensor a = Tensor::from_floats(std::vector<float>{1, 2, 3}, {3}, gpu);
  const Tensor b = Tensor::from_floats(std::vector<float>{10, 20, 30}, {3}, gpu);
  const Tensor c = Tensor::zeros({3}, DType::F32, gpu), out = Tensor::zeros({3}, DType::F32, gpu);
  cuda::Stream side;
  cudaEvent_t forked = nullptr, computed = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&computed, cudaEventDisableTiming), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(forked, stream_->get()), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side.get(), forked, 0), cudaSuccess);
  cudaStreamCaptureStatus status{};
  ASSERT_EQ(cudaStreamIsCapturing(side.get(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  {
    const cuda::StreamGuard on(side);
    ops::residual_forward(c, a, b);
  }
  ASSERT_EQ(cudaEventRecord(computed, side.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream_->get(), computed, 0), cudaSuccess);
  {
    const cuda::StreamGuard on(*stream_);
    ops::residual_forward(out, c, a);
  }
  ASSERT_EQ(cudaStreamEndCapture(stream_->get(), &graph), cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(side.get(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  side.synchronize();
  stream_->synchronize();
  EXPECT_EQ(out.to_floats(), std::vector<float>(3, 0.0f)) << "captured work ran during the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_->get()), cudaSuccess);
  stream_->synchronize();
  EXPECT_EQ(out.to_floats(), (std::vector<float>{12, 24, 36}));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(forked), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(computed), cudaSuccess);
}

// A stream forked into the capture whose last work the origin never waits for: ending the capture fails as
// unjoined, and the side stream no longer captures.
TEST_F(GraphCapture, AForkNeverJoinedBackFailsTheCapture) {
  const Device gpu = Device::cuda();
  const Tensor a = Tensor::from_floats(std::vector<float>{1, 2}, {2}, gpu);
  const Tensor c = Tensor::zeros({2}, DType::F32, gpu);
  cuda::Stream side;
  cudaEvent_t forked = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(forked, stream_->get()), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side.get(), forked, 0), cudaSuccess);
  {
    const cuda::StreamGuard on(side);
    ops::residual_forward(c, a, a);
  }
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_->get(), &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  cudaStreamCaptureStatus status{};
  ASSERT_EQ(cudaStreamIsCapturing(side.get(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaEventDestroy(forked), cudaSuccess);
}

// Asking about such an event is refused and, as for the other refusals, invalidates the capture (an H200 with
// CUDA 13.0 ended this capture with cudaErrorStreamCaptureInvalidated).
TEST_F(GraphCapture, QueryingAnEventRecordedInTheCaptureIsRefused) {
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  expect_refused(
      [&] {
        EXPECT_EQ(cudaEventRecord(event, stream_->get()), cudaSuccess);
        return cudaEventQuery(event);
      },
      cudaErrorCapturedEvent);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

}  // namespace
}  // namespace lab
