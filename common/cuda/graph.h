// A CUDA graph of the work one stream queues: captured once, launched (replayed) as often as wanted.
//
// Why: a training step is hundreds of kernel launches, each costing the host a few microseconds to queue; a graph
// queues them all with one call, so a step whose kernels are short no longer waits for the host. The price is
// that a replay repeats exactly what the capture saw: the same kernels with the same arguments on the same
// addresses. New inputs reach it only through the memory it reads, and anything the host decided during the
// capture (a branch on a value read back, a learning rate passed as a number) is frozen into the graph.
//
// The capture runs in global mode: while it lasts, a call that would synchronise with the stream, allocate or
// free device memory, or copy synchronously fails (CUDA refuses it, and the emulator does the same), and the
// capture with it. capture() then throws one Error(Cuda) that names the call, rather than leave the stream
// capturing.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "common/cuda/stream.h"

namespace lab::cuda {

class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Captures the work `enqueue` queues on `stream` (which must be current on its device while `enqueue` runs, so
  // that the ops queue there; capture() makes it current) and instantiates it; replaces an earlier capture. Nothing
  // runs until launch(). Error(Cuda) when the capture failed, naming what `enqueue` did that a graph cannot hold;
  // an Error thrown by `enqueue` itself ends the capture and is rethrown.
  void capture(const Stream& stream, const std::function<void()>& enqueue);
  // Queues one replay on `stream` (InvalidArgument before a capture).
  void launch(const Stream& stream) const;
  bool captured() const { return exec_ != nullptr; }

 private:
  void reset() noexcept;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace lab::cuda
