// What the tests of the CUDA emulator share: a fixture that starts and ends every test with a healthy
// device, a launch that returns the launch's error code (as a GPU reports it), device and pinned buffers,
// a stream gate, and the check of a kernel fault.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "common/cuda/emulation/fault.h"
#include "common/cuda/emulation/kernel_launch.h"

namespace lab::cuda::emu::test {

// Every test starts and ends with no fault and no pending error, whatever the previous one did.
class EmulationTest : public ::testing::Test {
 protected:
  void SetUp() override { reset(); }
  void TearDown() override { reset(); }
  static void reset() {
    ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
};

// Launches `kernel` as LAB_LAUNCH does in the emulation build and returns the launch's error code.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  launch_kernel("test_kernel", kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
  return cudaGetLastError();
}

// Launches a kernel that faults while it runs, under `name`. The launch itself succeeds; but the stream's
// thread may run the kernel, and fault, before the launch's own check, which then already reports the
// fault (as cudaGetLastError may on a GPU).
template <typename... Params, typename... Args>
void launch_faulting(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) {
  launch_kernel(name, kernel, grid, block, 0, nullptr, std::forward<Args>(args)...);
  const cudaError_t error = cudaGetLastError();
  EXPECT_TRUE(error == cudaSuccess || error == cudaErrorLaunchFailure) << cudaGetErrorName(error);
}

// Device memory of n elements of T, freed at the end of the scope.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { EXPECT_EQ(cudaMalloc(&data_, n * sizeof(T)), cudaSuccess); }
  explicit DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(values.size()) { upload(values); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& values) {
    ASSERT_EQ(cudaMemcpy(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> values(n_);
    EXPECT_EQ(cudaMemcpy(values.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }

 private:
  T* data_ = nullptr;
  size_t n_;
};

// Pinned host memory of n elements of T.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t n) : n_(n) {
    EXPECT_EQ(cudaHostAlloc(&data_, n * sizeof(T), cudaHostAllocPortable), cudaSuccess);
  }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* get() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t n_;
};

// Holds a stream at a host function until open() (or the end of the scope): what is queued behind it
// cannot run yet. The host function only spins on a flag. The flags live on the heap and the host function
// frees them: the gate may be gone before its host function even starts (when the stream has work before it).
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) : flags_(new Flags) {
    EXPECT_EQ(cudaLaunchHostFunc(stream, &StreamGate::wait, flags_), cudaSuccess);
  }
  ~StreamGate() { open(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  // Returns once the host function runs (it holds the runtime's host-function thread from then on).
  void wait_until_holding() const {
    while (flags_ && !flags_->holding.load()) std::this_thread::yield();
  }
  void open() {
    if (flags_) flags_->open.store(true);
    flags_ = nullptr;  // from here on the host function owns (and frees) them
  }

 private:
  struct Flags {
    std::atomic<bool> open{false};
    std::atomic<bool> holding{false};
  };
  static void wait(void* arg) {
    auto* flags = static_cast<Flags*>(arg);
    flags->holding.store(true);
    while (!flags->open.load()) {
    }
    delete flags;
  }
  Flags* flags_;
};

// Waits for the device and expects the sticky fault `code` whose description (last_fault()) holds every
// string of `parts`; returns the description.
inline std::string expect_fault(cudaError_t code, std::initializer_list<std::string> parts) {
  EXPECT_EQ(cudaDeviceSynchronize(), code);
  const std::string fault = last_fault();
  for (const std::string& part : parts)
    EXPECT_NE(fault.find(part), std::string::npos) << "expected '" << part << "' in: " << fault;
  return fault;
}

}  // namespace lab::cuda::emu::test
