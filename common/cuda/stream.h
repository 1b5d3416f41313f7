// Streams and events, and the thread's *current stream*: the stream every op, copy and allocation of this
// thread uses on a given device.
//
// The current stream starts as the legacy default stream (which orders itself with every other blocking
// stream), so code that never mentions streams is simply sequential. To put work elsewhere, for example
// host-to-device copies on a copy stream beside the compute stream (chapter 5), switch it for a scope:
//
//     Stream copy_stream;                       // a new non-blocking stream on the current device
//     { StreamGuard on(copy_stream); batch.copy_from(pinned); ready.record(); }
//     compute_stream.wait(ready);               // order the consumer after the copy, without a host sync
//
// Memory allocated while a stream is current is reused only on that stream (see caching_allocator.h), so
// a tensor handed from one stream to another needs an event between the two, as above, and, when the
// other stream may still use it after its owner frees it, record_stream(tensor, other_stream).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/core/device.h"

namespace lab::cuda {

class Event;

// The calling thread's current stream on `device`, or on the current device.
cudaStream_t current_stream(int device);
cudaStream_t current_stream();

// An owned CUDA stream on one device.
class Stream {
 public:
  Stream();  // on the current device
  explicit Stream(int device);
  // Waits for the stream's queued work, then frees its cuBLAS workspace and hands its cached blocks to
  // the other streams (caching_allocator.h) before destroying it.
  ~Stream();
  Stream(Stream&& other) noexcept;  // the moved-from stream is left empty
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;             // blocks the host until the queued work has finished
  bool query() const;                   // true when the queued work has finished (never blocks)
  void wait(const Event& event) const;  // later work on this stream waits for `event` (no host sync)

 private:
  void release() noexcept;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// Makes `stream` the current stream of its device on this thread until the guard goes out of scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t saved_;
};

// An owned CUDA event on one device: a point in a stream to wait for or to time from.
class Event {
 public:
  explicit Event(bool timing = true);  // on the current device; timing = false makes record/wait cheaper
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }
  bool timing_enabled() const { return timing_; }
  void record();                      // on the current stream of the event's device
  void record(const Stream& stream);  // the stream must live on the event's device
  void synchronize() const;           // blocks the host until the recorded work has finished
  bool query() const;                 // true when the recorded work has finished (never blocks)

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = 0;
  bool timing_ = true;
};

// Milliseconds of GPU time between two recorded timing events (waits for `end`). Throws InvalidArgument
// when either event was created without timing.
float elapsed_ms(const Event& start, const Event& end);

// Queues a copy of `bytes` on the current stream of the device involved (the destination's when both are
// GPUs) and returns at once when the host side is pinned memory (see pinned.h). The caller orders later
// use through the stream or an event.
void copy_async(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace lab::cuda
