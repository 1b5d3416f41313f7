#include "common/cuda/time_candidates.h"

#include <cuda_runtime.h>

#include "common/core/error.h"
#include "common/cuda/check.h"
#include "common/cuda/stream.h"

namespace lab::cuda {

TimedCandidates time_candidates(const std::vector<std::function<void()>>& candidates, int repeats) {
  LAB_CHECK(!candidates.empty() && repeats > 0, InvalidArgument, "time_candidates: ", candidates.size(),
            " candidates, ", repeats, " repeats");
  LAB_CHECK(!capturing(current_stream()), InvalidArgument,
            "time_candidates: the stream is being captured into a graph");
  TimedCandidates timed;
  Event start, stop;
  for (const std::function<void()>& candidate : candidates) {
    candidate();
    start.record();
    for (int r = 0; r < repeats; ++r) candidate();
    stop.record();
    timed.ms.push_back(elapsed_ms(start, stop) / static_cast<float>(repeats));
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
