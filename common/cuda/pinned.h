// Pinned (page-locked) host memory, owned RAII-style.
//
// The GPU's copy engines read and write pinned memory directly, so a host-to-device copy from it runs at
// full PCIe/NVLink speed and, queued with copy_async (stream.h), returns to the host at once: the CPU
// prepares the next batch while the previous one is in flight. Pageable memory is first staged through
// a driver buffer and the copy blocks. Chapter 5's loaders stage their token batches here.
//
// Pinning takes memory away from the operating system's pager: allocate a few buffers and reuse them.
#pragma once

#include <cstddef>
#include <span>

namespace lab::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // Throws Error(ErrorKind::Cuda) naming the size when the driver cannot pin that much (or there is none).
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();  // cudaFreeHost, which waits for the device to finish any copy that reads it
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The buffer as an array of T (bytes() / sizeof(T) elements).
  template <typename T>
  std::span<T> as() const {
    return {static_cast<T*>(data_), bytes_ / sizeof(T)};
  }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lab::cuda
