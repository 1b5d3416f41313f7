// Streams and events. Each stream is an OS thread working through an in-order queue of work items
// (kernels, copies, memsets, GEMMs, host functions, event records, waits). A work item may have to wait
// for an item of another stream first:
//
//   - cudaStreamWaitEvent: for the item that recorded the event;
//   - the legacy default stream (handle 0 or cudaStreamLegacy, one per device) orders itself with every
//     blocking stream of its device: its items wait for the work already queued on those streams, and their
//     items wait for the work already queued on it. Streams created cudaStreamNonBlocking take no part.
//
// Every item is numbered on its stream (a ticket); "done" means the stream has completed that many
// items. An event is (stream, ticket, the time its record ran). Once a device has faulted, its streams
// drain their queues without running the items, as a GPU's work fails after a fault.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

namespace lab::cuda::emu {

// The stream a handle names: null and cudaStreamLegacy name the current device's legacy stream. nullptr
// for a handle that is no live stream.
CUstream_st* resolve_stream(cudaStream_t handle);

int stream_device(const CUstream_st& stream);

// Queues `work` on `stream` and returns its ticket.
uint64_t enqueue(CUstream_st& stream, std::function<void()> work);

// Blocks until the item with `ticket` on `stream` has completed.
void wait_for(CUstream_st& stream, uint64_t ticket);

// Blocks until all work queued on the device so far has completed.
void synchronize_device(int device);

}  // namespace lab::cuda::emu
