#include "common/cuda/stream.h"

#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/cuda/caching_allocator.h"
#include "common/cuda/check.h"
#include "common/cuda/cublas.h"
#include "common/cuda/runtime.h"

namespace lab::cuda {

// ---------------------------------------------------------------- the current stream

namespace {

// Per thread, per device: the stream ops launch on. Devices never seen default to the legacy stream.
thread_local std::vector<cudaStream_t> t_current_streams;

cudaStream_t& current_slot(int device) {
  check_device_index(device);
  if (t_current_streams.size() <= static_cast<size_t>(device))
    t_current_streams.resize(static_cast<size_t>(device) + 1, cudaStreamLegacy);
  return t_current_streams[static_cast<size_t>(device)];
}

}  // namespace

cudaStream_t current_stream(int device) {
  return current_slot(device);
}
cudaStream_t current_stream() {
  return current_stream(current_device());
}

StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()) {
  cudaStream_t& slot = current_slot(device_);
  saved_ = slot;
  slot = stream.get();
}

StreamGuard::~StreamGuard() {
  t_current_streams[static_cast<size_t>(device_)] = saved_;
}

// ---------------------------------------------------------------- Stream

Stream::Stream() : Stream(current_device()) {}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);
  // Non-blocking: this stream does not wait for the legacy default stream, so a copy stream really runs
  // beside the compute stream.
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  release();
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    release();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Stream::release() noexcept {
  if (!stream_) return;
  // Errors cannot be reported from a destructor; a failed wait here means the device is already broken
  // and the next checked call says so.
  cudaStreamSynchronize(stream_);
  // The stream's work has finished: its cuBLAS workspace and cached blocks can go to other streams. The
  // workspace first, so that its block is among those handed on.
  release_stream_workspace(device_, stream_);
  release_stream(device_, stream_);
  cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

void Stream::synchronize() const {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

bool Stream::query() const {
  return CUDA_QUERY(cudaStreamQuery(stream_));
}

void Stream::wait(const Event& event) const {
  CUDA_CHECK(cudaStreamWaitEvent(stream_, event.get(), 0));
}

// ---------------------------------------------------------------- Event

Event::Event(bool timing) : device_(current_device()), timing_(timing) {
  CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}

void Event::record() {
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaEventRecord(event_, current_stream(device_)));
}

void Event::record(const Stream& stream) {
  LAB_CHECK(stream.device() == device_, InvalidArgument, "an event of cuda:", device_,
            " cannot be recorded on a stream of cuda:", stream.device());
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaEventRecord(event_, stream.get()));
}

void Event::synchronize() const {
  CUDA_CHECK(cudaEventSynchronize(event_));
}

bool Event::query() const {
  return CUDA_QUERY(cudaEventQuery(event_));
}

float elapsed_ms(const Event& start, const Event& end) {
  LAB_CHECK(start.timing_enabled() && end.timing_enabled(), InvalidArgument,
            "elapsed_ms: both events must be created with timing = true");
  end.synchronize();
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

// ---------------------------------------------------------------- asynchronous copies

void copy_async(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  LAB_CHECK(dst_device.is_cuda() || src_device.is_cuda(), InvalidArgument,
            "copy_async: host-to-host copies need no stream; use std::memcpy");
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, current_stream(device)));
}

}  // namespace lab::cuda
