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
//
// Host functions (cudaLaunchHostFunc) run one at a time, on what stands for the runtime's own thread: CUDA
// says host functions of unordered streams "may be serialized", and a synchronous copy from the device to
// pageable host memory is completed by that same thread (on an H100, driver 580, such a copy did not return
// while a host function of another, non-blocking stream was still running). A host function that waits
// for the host program therefore deadlocks a program that makes such a copy meanwhile; here the host
// thread's waits watch for it (LAB_EMU_DEADLOCK_SECONDS) and end the process with a message naming both.
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

// Blocks until the item with `ticket` on `stream` has completed. `call` names the runtime call that waits,
// for the deadlock report.
void wait_for(CUstream_st& stream, uint64_t ticket, const char* call);

// Blocks until all work queued on the device so far has completed.
void synchronize_device(int device, const char* call);

// Runs `work` on the runtime's host-function thread (see above): after any host function running now has
// returned, and before the next starts. Called by stream items, never by a host thread.
void run_on_runtime_thread(const std::function<void()>& work);

}  // namespace lab::cuda::emu
