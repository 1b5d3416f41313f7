// The fastest of several ways to queue the same work, timed on the device: what FlashTiles::Timed
// (common/ops/flash_attention.h) uses to pick among kernel sets that give the same bits. Choosing by time is safe
// only among candidates whose results are equal bit for bit; otherwise a run's values would depend on timing noise.
//
//   const TimedCandidates timed = time_candidates({[&] { run_a(); }, [&] { run_b(); }});
//   use(timed.fastest);
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

namespace lab::cuda {

struct TimedCandidates {
  int fastest = 0;        // index of the smallest time; ties go to the earlier candidate
  std::vector<float> ms;  // each candidate's mean time per run, milliseconds
};

// Each candidate queues its work on the current stream of the current device; each is queued once untimed (its
// first launch loads its kernels), then `repeats` times between two CUDA events (stream.h's Event, elapsed_ms),
// and the host waits once per candidate. Not under stream capture, where events cannot be timed and the stream
// not waited for: `capturing` first.
TimedCandidates time_candidates(const std::vector<std::function<void()>>& candidates, int repeats = 3);

// True while `stream` is being captured into a CUDA graph.
bool capturing(cudaStream_t stream);

}  // namespace lab::cuda
