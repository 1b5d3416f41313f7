#include "common/cuda/time_candidates.h"

#include <cuda_runtime.h>

#include "common/core/error.h"
#include "common/cuda/check.h"

namespace lab::cuda {

namespace {

// Two events, destroyed however the timing ends.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

TimedCandidates time_candidates(cudaStream_t stream, const std::vector<std::function<void()>>& candidates,
                                int repeats) {
  LAB_CHECK(!candidates.empty() && repeats > 0, InvalidArgument, "time_candidates: ", candidates.size(),
            " candidates, ", repeats, " repeats");
  LAB_CHECK(!capturing(stream), InvalidArgument, "time_candidates: the stream is being captured into a graph");
  TimedCandidates timed;
  const EventPair events;
  for (const std::function<void()>& candidate : candidates) {
    candidate();
    CUDA_CHECK(cudaEventRecord(events.start, stream));
    for (int r = 0; r < repeats; ++r) candidate();
    CUDA_CHECK(cudaEventRecord(events.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    timed.ms.push_back(ms / static_cast<float>(repeats));
    if (timed.ms.back() < timed.ms[timed.fastest]) timed.fastest = static_cast<int>(timed.ms.size()) - 1;
  }
  return timed;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace lab::cuda
