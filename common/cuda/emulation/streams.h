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

// Queues `work` on `stream` and returns its ticket; on a capturing stream, records it for the graph instead
// (ticket 0: nothing to wait for).
uint64_t enqueue(CUstream_st& stream, std::function<void()> work);

// Work made anew each time it is queued: `make` runs now and its work is queued, or, on a capturing stream, the
// graph keeps `make` and runs it at every cudaGraphLaunch, in the order of the launches and of the graph's
// nodes. For work that must take its place in the host's order of calls each time it runs (an NCCL call's
// turn on its communicator) or that can run only once (an operation that owns its buffers).
using WorkMaker = std::function<std::function<void()>()>;
uint64_t enqueue_made(CUstream_st& stream, WorkMaker make);

// Stream capture (cudaStreamBeginCapture ... cudaStreamEndCapture, global mode): the work queued on a
// capturing stream is recorded, not run, and cudaGraphLaunch queues it again, in order, on the stream it is
// given, as often as it is launched (every recorded item must be safe to run again: they hold their arguments
// by value; or it is made again at each launch, enqueue_made). What CUDA refuses during a capture is refused with its
// error and invalidates the capture, so that cudaStreamEndCapture then returns cudaErrorStreamCaptureInvalidated:
// synchronising with a capturing stream (cudaStreamSynchronize, cudaStreamQuery, a copy from or to pageable memory on
// it; cudaDeviceSynchronize, cudaMalloc, cudaFree, cudaMemcpy, cudaMemset while any stream captures:
// cudaErrorStreamCaptureUnsupported; the legacy stream's implicit synchronisation: cudaErrorStreamCaptureImplicit), a
// capturing stream waiting for an event recorded outside its capture (cudaErrorStreamCaptureIsolation), and querying an
// event recorded inside one (cudaErrorCapturedEvent). Another stream joins a capture by waiting for one of its
// events (a fork): its work is recorded in the same graph, in the host's order, and the origin must wait for an
// event recorded after the forked stream's last work before the capture ends (a join), or cudaStreamEndCapture
// returns cudaErrorStreamCaptureUnjoined (a join through another forked stream, which CUDA accepts, is not
// followed).
//
// Whether a stream of `device` (-1: any) is capturing now.
bool any_capture(int device);
// cudaSuccess when no capture forbids the call; otherwise invalidates the capture of `stream` (or, with a null
// `stream`, every capture on `device`, -1 for any) and returns `error` (recorded as the thread's last error).
cudaError_t refuse_during_capture(const CUstream_st* stream, int device, cudaError_t error);

// Blocks until the item with `ticket` on `stream` has completed. `call` names the runtime call that waits,
// for the deadlock report.
void wait_for(CUstream_st& stream, uint64_t ticket, const char* call);

// Blocks until all work queued on the device so far has completed.
void synchronize_device(int device, const char* call);

// Runs `work` on the runtime's host-function thread (see above): after any host function running now has
// returned, and before the next starts. Called by stream items, never by a host thread.
void run_on_runtime_thread(const std::function<void()>& work);

}  // namespace lab::cuda::emu
