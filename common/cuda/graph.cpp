// Capture and replay of a stream's work (see graph.h).
#include "common/cuda/graph.h"

#include <exception>

#include "common/core/error.h"
#include "common/cuda/check.h"

namespace lab::cuda {

Graph::~Graph() {
  reset();
}

void Graph::reset() noexcept {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

void Graph::capture(const Stream& stream, const std::function<void()>& enqueue) {
  reset();
  const StreamGuard on(stream);
  CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
  // The first refused call invalidates the capture; the op that made it usually throws at once, and the capture
  // must still be ended so that the stream is usable again.
  std::exception_ptr failure;
  try {
    enqueue();
  } catch (...) {
    failure = std::current_exception();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream.get(), &graph);
  cudaGetLastError();  // the refused call's error belongs to this capture, not to the next launch's check
  if (graph != nullptr && (failure || ended != cudaSuccess)) cudaGraphDestroy(graph);
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      fail(e.kind(), "CUDA graph capture: ", e.what());
    }
  }
  LAB_CHECK(ended == cudaSuccess, Cuda, "CUDA graph capture failed: ", cudaGetErrorName(ended), " (",
            cudaGetErrorString(ended), "): ",
            ended == cudaErrorStreamCaptureUnjoined
                ? "a stream that joined the capture by waiting for one of its events was never waited for again by "
                  "the capturing stream"
                : "the captured work made a call that a graph cannot hold (a synchronisation, an allocation or a "
                  "synchronous copy)");
  graph_ = graph;
  CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
}

void Graph::launch(const Stream& stream) const {
  LAB_CHECK(exec_ != nullptr, InvalidArgument, "cuda::Graph::launch before a capture");
  CUDA_CHECK(cudaGraphLaunch(exec_, stream.get()));
}

}  // namespace lab::cuda
