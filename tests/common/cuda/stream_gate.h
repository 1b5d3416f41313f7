// Holds a stream at a host callback until release() (or the end of the scope): whatever is queued behind
// it cannot run yet. Tests use it to keep work of one stream "still running" while another stream moves on.
// The callback only spins on an atomic; it makes no CUDA call.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>

#include "common/cuda/stream.h"

namespace lab::test {

class StreamGate {
 public:
  explicit StreamGate(const cuda::Stream& stream) {
    EXPECT_EQ(cudaLaunchHostFunc(stream.get(), &StreamGate::wait, &open_), cudaSuccess);
  }
  ~StreamGate() { release(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  void release() { open_.store(true); }

 private:
  static void wait(void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) {
    }
  }
  std::atomic<bool> open_{false};
};

}  // namespace lab::test
