// Streams and events (see streams.h), and their runtime calls.
#include "common/cuda/emulation/streams.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda/emulation/addressable.h"
#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/settings.h"

using lab::cuda::emu::record;

namespace {

using Clock = std::chrono::steady_clock;

// A work item must not start before `ticket` has completed on `stream`.
struct Dependency {
  std::shared_ptr<CUstream_st> stream;
  uint64_t ticket;
};

struct WorkItem {
  std::function<void()> work;
  std::vector<Dependency> after;
};

// What an event points at after a record: the record's place in its stream, and when it ran.
struct EventRecord {
  std::shared_ptr<CUstream_st> stream;
  uint64_t ticket = 0;
  Clock::time_point ran_at{};
};

// A capture in progress: the work queued since cudaStreamBeginCapture on its origin stream and on the streams
// forked into it, in the host's order (an order that respects every event between them, so the graph replays
// it on one stream). A forked stream counts its places in the capture (the fork, each item, each event record);
// it is joined once the origin has waited for an event recorded at its last place.
struct Capture {
  std::vector<lab::cuda::emu::WorkMaker> work;
  bool invalidated = false;
  const CUstream_st* origin = nullptr;
  struct Forked {
    uint64_t places = 0;  // the fork, then one per item queued or event recorded
    uint64_t joined = 0;  // the last place the origin waited for
  };
  std::map<const CUstream_st*, Forked> forked;

  // Records `make` for the graph; the place it takes on `stream`, when that is a forked stream.
  void record(const CUstream_st& stream, lab::cuda::emu::WorkMaker make) {
    work.push_back(std::move(make));
    if (&stream != origin) ++forked[&stream].places;
  }
};

}  // namespace

// A captured graph, and its executable form: the work in queue order.
struct CUgraph_st {
  std::vector<lab::cuda::emu::WorkMaker> work;
};
struct CUgraphExec_st {
  std::vector<lab::cuda::emu::WorkMaker> work;
};

// The handles of the API are pointers to these (opaque in the headers).
struct CUstream_st {
  int device = 0;
  bool legacy = false;
  bool blocking = true;
  std::deque<WorkItem> queue;  // not yet started
  uint64_t queued = 0;         // tickets handed out
  uint64_t completed = 0;      // items finished (or skipped after a fault)
  bool stopping = false;
  std::condition_variable has_work;
  std::thread worker;
  std::shared_ptr<Capture> capture;  // while capturing: where its work goes instead of the queue
};

struct CUevent_st {
  int device = 0;
  bool timing = true;
  std::shared_ptr<EventRecord> last;         // null until recorded
  std::shared_ptr<Capture> captured;         // the capture the last record was made in (null: a real record)
  const CUstream_st* captured_on = nullptr;  // the stream of that record, and its place there (forked streams)
  uint64_t captured_at = 0;
};

namespace lab::cuda::emu {

namespace {

// The host function running now on the runtime's host-function thread, for the deadlock report.
struct RunningHostFunction {
  cudaHostFn_t fn = nullptr;
  const CUstream_st* stream = nullptr;
  Clock::time_point since{};
};

// One lock for all queues: enqueues are short, and the legacy stream's rules need a consistent view of all.
struct Engine {
  std::mutex mutex;
  std::condition_variable progress;                              // any item completed
  std::map<CUstream_st*, std::shared_ptr<CUstream_st>> streams;  // created streams
  std::vector<std::shared_ptr<CUstream_st>> legacy;              // per device, created on first use
  std::map<CUevent_st*, std::unique_ptr<CUevent_st>> events;
  // The runtime's host-function thread: held while a host function, or the host side of a copy to pageable
  // memory, runs. `running` (under `mutex`) says which host function holds it.
  std::mutex runtime_thread;
  std::optional<RunningHostFunction> running;
};

// The process that made the engine, whose threads work through its streams: a forked child has the queues but
// not the threads.
pid_t engine_pid = 0;

// Never destroyed: stream threads wait on its mutex until the process ends.
Engine& engine() {
  static Engine* const e = [] {
    engine_pid = getpid();
    auto* created = new Engine;
    created->legacy.resize(static_cast<size_t>(device_count()));
    return created;
  }();
  return *e;
}

bool done(const CUstream_st& stream, uint64_t ticket) {
  return stream.completed >= ticket;
}

// Set on the stream threads, whose items must not wait for the queues they work through.
thread_local bool on_stream_thread = false;

void work_through(CUstream_st* stream) {
  on_stream_thread = true;
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  for (;;) {
    stream->has_work.wait(lock, [&] { return stream->stopping || !stream->queue.empty(); });
    if (stream->queue.empty()) return;  // stopping, and drained
    WorkItem item = std::move(stream->queue.front());
    stream->queue.pop_front();
    e.progress.wait(lock, [&] {
      for (const Dependency& d : item.after)
        if (!done(*d.stream, d.ticket)) return false;
      return true;
    });
    lock.unlock();
    if (sticky_error(stream->device) == cudaSuccess) item.work();
    item = WorkItem{};  // release what the work captured before taking the lock again
    lock.lock();
    ++stream->completed;
    e.progress.notify_all();
  }
}

std::shared_ptr<CUstream_st> start_stream(int device, bool legacy, bool blocking) {
  auto stream = std::make_shared<CUstream_st>();
  stream->device = device;
  stream->legacy = legacy;
  stream->blocking = blocking;
  stream->worker = std::thread(work_through, stream.get());
  return stream;
}

// The shared owner of a stream (callers hold the engine's mutex).
std::shared_ptr<CUstream_st> owner_of(Engine& e, CUstream_st* stream) {
  if (stream->legacy) return e.legacy[static_cast<size_t>(stream->device)];
  return e.streams.at(stream);
}

// The dependencies the legacy stream's rules give a new item on `stream` (callers hold the mutex).
std::vector<Dependency> implicit_dependencies(Engine& e, const CUstream_st& stream) {
  std::vector<Dependency> after;
  if (stream.legacy) {
    for (const auto& [handle, other] : e.streams)
      if (other->device == stream.device && other->blocking && !done(*other, other->queued))
        after.push_back({other, other->queued});
  } else if (stream.blocking) {
    const auto& legacy = e.legacy[static_cast<size_t>(stream.device)];
    if (legacy && !done(*legacy, legacy->queued)) after.push_back({legacy, legacy->queued});
  }
  return after;
}

// At exit, the work still queued runs to completion before the process ends. Left alone, the stream threads
// would run it while the program's static objects are destroyed, and what it holds would be reported as leaked
// (LeakSanitizer checks after every exit handler), so the emulator finishes it first. Skipped on a stream thread (an
// item that ends the process) and in a forked child, which has the queues but not their threads (a death test's).
void drain_at_exit() {
  if (on_stream_thread || getpid() != engine_pid) return;
  for (int device = 0; device < device_count(); ++device) synchronize_device(device, "the process's exit");
}

// Registered at the first enqueue rather than when the engine is made, so that it runs before the destructors
// of the statics made until then (the allocators, cuBLAS's handle) that queued work may use.
void drain_at_exit_once() {
  static const bool registered = std::atexit(drain_at_exit) == 0;
  (void)registered;
}

// Appends `item` to `stream`'s queue as it is, and returns its ticket (callers hold the mutex).
uint64_t push_locked(CUstream_st& stream, WorkItem item) {
  drain_at_exit_once();
  stream.queue.push_back(std::move(item));
  stream.has_work.notify_one();
  return ++stream.queued;
}

uint64_t enqueue_locked(Engine& e, CUstream_st& stream, std::function<void()> work, std::vector<Dependency> after) {
  std::vector<Dependency> implicit = implicit_dependencies(e, stream);
  after.insert(after.end(), implicit.begin(), implicit.end());
  return push_locked(stream, WorkItem{std::move(work), std::move(after)});
}

// "lab::test::StreamGate::wait(void*)" when the symbol is visible to the dynamic linker, else its address.
std::string host_function_name(cudaHostFn_t fn) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(fn), &info) != 0 && info.dli_sname != nullptr) return info.dli_sname;
  char address[32];
  std::snprintf(address, sizeof(address), "%p", reinterpret_cast<void*>(fn));
  return std::string("at ") + address;
}

std::string stream_name(const CUstream_st& stream) {
  char text[96];
  if (stream.legacy)
    std::snprintf(text, sizeof(text), "the legacy default stream of device %d", stream.device);
  else
    std::snprintf(text, sizeof(text), "%s stream %p of device %d", stream.blocking ? "blocking" : "non-blocking",
                  static_cast<const void*>(&stream), stream.device);
  return text;
}

// The host thread's waits: until `ready`, unless a host function holds the runtime's thread for longer than
// LAB_EMU_DEADLOCK_SECONDS while this thread waits. On a GPU such a wait may never end: the host function
// waits for the host program (which is here, waiting), and the work waited for needs the runtime's thread
// or comes after the host function. The emulator says so and ends the process, as a hung GPU program would
// have to be ended (callers hold the engine's mutex).
template <typename Ready>
void wait_watching_for_deadlock(Engine& e, std::unique_lock<std::mutex>& lock, const char* call, Ready ready) {
  const int limit = settings().deadlock_seconds;
  if (limit == 0) {
    e.progress.wait(lock, ready);
    return;
  }
  const auto began = Clock::now();
  const auto patience = std::chrono::seconds(limit);
  while (!e.progress.wait_for(lock, std::chrono::milliseconds(200), ready)) {
    const auto now = Clock::now();
    if (!e.running || now - began < patience || now - e.running->since < patience) continue;
    const auto held = std::chrono::duration_cast<std::chrono::seconds>(now - e.running->since).count();
    std::fprintf(stderr,
                 "lab cuda emulation: deadlock: %s has waited %d s, and all that time host function %s, queued on "
                 "%s, has not returned (%lld s). Host functions run on the runtime's own thread, one at a time, "
                 "and the work waited for needs that thread or comes after the host function: on a GPU this call "
                 "never returns if the host function waits for this thread. A host function must not wait for "
                 "the host program; release it before making a synchronous call "
                 "(LAB_EMU_DEADLOCK_SECONDS sets the wait).\n",
                 call, limit, host_function_name(e.running->fn).c_str(), stream_name(*e.running->stream).c_str(),
                 static_cast<long long>(held));
    std::fflush(stderr);
    std::abort();
  }
}

CUevent_st* resolve_event(Engine& e, cudaEvent_t handle) {
  const auto it = e.events.find(handle);
  return it == e.events.end() ? nullptr : it->second.get();
}

}  // namespace

namespace {

// The stream `handle` names, the legacy one of `device` for null and cudaStreamLegacy (started on first use);
// nullptr for a handle that is no live stream, or a device that does not exist (callers hold the mutex).
CUstream_st* resolve_stream_locked(Engine& e, cudaStream_t handle, int device) {
  if (handle == nullptr || handle == cudaStreamLegacy) {
    if (!valid_device(device)) return nullptr;
    auto& legacy = e.legacy[static_cast<size_t>(device)];
    if (!legacy) legacy = start_stream(device, true, true);
    return legacy.get();
  }
  return e.streams.contains(handle) ? handle : nullptr;
}

}  // namespace

CUstream_st* resolve_stream(cudaStream_t handle) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return resolve_stream_locked(e, handle, current_device());
}

int stream_device(const CUstream_st& stream) {
  return stream.device;
}

uint64_t enqueue(CUstream_st& stream, std::function<void()> work) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (stream.capture) {  // recorded for cudaGraphLaunch, not run; no ticket to wait for
    stream.capture->record(stream, [work = std::move(work)] { return work; });
    return 0;
  }
  return enqueue_locked(e, stream, std::move(work), {});
}

uint64_t enqueue_made(CUstream_st& stream, WorkMaker make) {
  {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mutex);
    if (stream.capture) {
      stream.capture->record(stream, std::move(make));
      return 0;
    }
  }
  return enqueue(stream, make());
}

bool after_queued_work(int device, cudaStream_t handle, std::function<void()> work) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  CUstream_st* stream = resolve_stream_locked(e, handle, device);
  if (stream == nullptr || stream->device != device || stream->capture) return false;
  push_locked(*stream, WorkItem{std::move(work), {}});  // no implicit dependencies: see addressable.h
  return true;
}

bool any_capture(int device) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  for (const auto& [handle, stream] : e.streams)
    if (stream->capture && (device < 0 || stream->device == device)) return true;
  return false;
}

cudaError_t refuse_during_capture(const CUstream_st* stream, int device, cudaError_t error) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  bool refused = false;
  for (const auto& [handle, s] : e.streams)
    if (s->capture && (s.get() == stream || (stream == nullptr && (device < 0 || s->device == device)))) {
      s->capture->invalidated = true;
      refused = true;
    }
  return refused ? record(error) : cudaSuccess;
}

void wait_for(CUstream_st& stream, uint64_t ticket, const char* call) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  wait_watching_for_deadlock(e, lock, call, [&] { return done(stream, ticket); });
}

void synchronize_device(int device, const char* call) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  std::vector<Dependency> pending;
  for (const auto& [handle, stream] : e.streams)
    if (stream->device == device) pending.push_back({stream, stream->queued});
  if (const auto& legacy = e.legacy[static_cast<size_t>(device)]) pending.push_back({legacy, legacy->queued});
  wait_watching_for_deadlock(e, lock, call, [&] {
    for (const Dependency& d : pending)
      if (!done(*d.stream, d.ticket)) return false;
    return true;
  });
}

void run_on_runtime_thread(const std::function<void()>& work) {
  std::lock_guard<std::mutex> held(engine().runtime_thread);
  work();
}

namespace {

// A host function's item: it takes the runtime's host-function thread for as long as it runs.
void run_host_function(const CUstream_st& stream, cudaHostFn_t fn, void* user_data) {
  Engine& e = engine();
  std::lock_guard<std::mutex> held(e.runtime_thread);
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    e.running = RunningHostFunction{fn, &stream, Clock::now()};
  }
  fn(user_data);
  std::lock_guard<std::mutex> lock(e.mutex);
  e.running.reset();
}

}  // namespace

}  // namespace lab::cuda::emu

// ---------------------------------------------------------------- the runtime calls

using namespace lab::cuda::emu;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0)
    return record(cudaErrorInvalidValue);
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  if (const cudaError_t sticky = sticky_error(device); sticky != cudaSuccess) return record(sticky);
  auto created = start_stream(device, false, (flags & cudaStreamNonBlocking) == 0);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  *stream = created.get();
  e.streams.emplace(created.get(), std::move(created));
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

// Unlike CUDA, which returns at once and releases the stream when its work is done, this waits for the
// stream's queued work (its thread finishes the queue) before returning.
cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  Engine& e = engine();
  std::shared_ptr<CUstream_st> stream;
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    const auto it = e.streams.find(handle);
    if (it == e.streams.end()) return record(cudaErrorInvalidResourceHandle);
    stream = std::move(it->second);
    e.streams.erase(it);
    stream->stopping = true;
    stream->has_work.notify_one();
  }
  stream->worker.join();
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  // The capturing stream itself, or the legacy stream, which would wait for a capturing blocking stream.
  if (const cudaError_t refused = refuse_during_capture(stream, -1, cudaErrorStreamCaptureUnsupported);
      refused != cudaSuccess)
    return refused;
  if (stream->legacy) {
    if (const cudaError_t refused = refuse_during_capture(nullptr, stream->device, cudaErrorStreamCaptureImplicit);
        refused != cudaSuccess)
      return refused;
  }
  // An empty item waits for everything the stream's rules order before it (for the legacy stream: the
  // blocking streams' work too), so waiting for it is waiting for all that.
  wait_for(*stream, enqueue(*stream, [] {}), "cudaStreamSynchronize");
  return record(sticky_error(stream->device));
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t refused = refuse_during_capture(stream, -1, cudaErrorStreamCaptureUnsupported);
      refused != cudaSuccess)
    return refused;
  if (const cudaError_t sticky = sticky_error(stream->device); sticky != cudaSuccess) return record(sticky);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (!done(*stream, stream->queued)) return cudaErrorNotReady;
  for (const Dependency& d : implicit_dependencies(e, *stream))
    if (!done(*d.stream, d.ticket)) return cudaErrorNotReady;
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void* user_data) {
  if (fn == nullptr) return record(cudaErrorInvalidValue);
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = sticky_error(stream->device); sticky != cudaSuccess) return record(sticky);
  enqueue(*stream, [stream, fn, user_data] { run_host_function(*stream, fn, user_data); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnown) != 0) return record(cudaErrorInvalidValue);
  // An interprocess event must be created without timing, as in CUDA.
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return record(cudaErrorInvalidValue);
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  auto created = std::make_unique<CUevent_st>();
  created->device = device;
  created->timing = (flags & cudaEventDisableTiming) == 0;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  *event = created.get();
  e.events.emplace(created.get(), std::move(created));
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t handle) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (e.events.erase(handle) == 0) return record(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t stream_handle) {
  CUstream_st* stream = resolve_stream(stream_handle);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  CUevent_st* event = resolve_event(e, handle);
  if (event == nullptr || stream == nullptr || stream->device != event->device)
    return record(cudaErrorInvalidResourceHandle);
  if (stream->capture) {  // a node of the graph: it orders the capture's work and times nothing here
    event->last.reset();
    event->captured = stream->capture;
    event->captured_on = stream;
    event->captured_at = stream == stream->capture->origin ? 0 : ++stream->capture->forked[stream].places;
    return cudaSuccess;
  }
  auto rec = std::make_shared<EventRecord>();
  rec->stream = owner_of(e, stream);
  rec->ticket = enqueue_locked(e, *stream, [rec] { rec->ran_at = Clock::now(); }, {});
  event->last = std::move(rec);
  event->captured.reset();
  return cudaSuccess;
}

namespace {
// Waiting on, or asking about, an event recorded inside a capture: CUDA refuses it and (seen on an H200,
// CUDA 13.0) invalidates the capture the record belongs to, so that ending it returns
// cudaErrorStreamCaptureInvalidated. The engine's lock is held.
cudaError_t refuse_captured_event(const CUevent_st& event) {
  event.captured->invalidated = true;
  return record(cudaErrorCapturedEvent);
}
}  // namespace

cudaError_t cudaEventQuery(cudaEvent_t handle) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  const CUevent_st* event = resolve_event(e, handle);
  if (event == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (event->captured) return refuse_captured_event(*event);
  if (const cudaError_t sticky = sticky_error(event->device); sticky != cudaSuccess) return record(sticky);
  if (event->last && !done(*event->last->stream, event->last->ticket)) return cudaErrorNotReady;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  const CUevent_st* event = resolve_event(e, handle);
  if (event == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (event->captured) return refuse_captured_event(*event);
  const std::shared_ptr<EventRecord> rec = event->last;
  const int device = event->device;
  if (rec) wait_watching_for_deadlock(e, lock, "cudaEventSynchronize", [&] { return done(*rec->stream, rec->ticket); });
  lock.unlock();
  return record(sticky_error(device));
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start_handle, cudaEvent_t end_handle) {
  if (ms == nullptr) return record(cudaErrorInvalidValue);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  const CUevent_st* start = resolve_event(e, start_handle);
  const CUevent_st* end = resolve_event(e, end_handle);
  if (start == nullptr || end == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (start->captured || end->captured) return record(cudaErrorCapturedEvent);
  if (const cudaError_t sticky = sticky_error(start->device); sticky != cudaSuccess) return record(sticky);
  // Events without timing, or never recorded, have no time to compare.
  if (!start->timing || !end->timing || !start->last || !end->last) return record(cudaErrorInvalidResourceHandle);
  if (!done(*start->last->stream, start->last->ticket) || !done(*end->last->stream, end->last->ticket))
    return record(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->last->ran_at - start->last->ran_at).count();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream_handle, cudaEvent_t handle, unsigned int flags) {
  if (flags != 0) return record(cudaErrorInvalidValue);
  CUstream_st* stream = resolve_stream(stream_handle);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  const CUevent_st* event = resolve_event(e, handle);
  if (stream == nullptr || event == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (stream->capture) {
    // Inside one capture an event orders its own work, which the capture keeps in order already (the join of a
    // forked stream into the origin is noted); a record made outside would tie the graph to work outside it,
    // which CUDA refuses.
    if (event->captured == stream->capture) {
      Capture& capture = *stream->capture;
      if (stream == capture.origin && event->captured_on != capture.origin) {
        Capture::Forked& forked = capture.forked[event->captured_on];
        forked.joined = std::max(forked.joined, event->captured_at);
      }
      return cudaSuccess;
    }
    stream->capture->invalidated = true;
    return record(cudaErrorStreamCaptureIsolation);
  }
  // Another stream waiting for an event of a capture joins the capture (a fork): what it queues from here on is
  // recorded in the same graph, until the origin's capture ends. The legacy stream cannot capture.
  if (event->captured) {
    if (stream->legacy) {
      event->captured->invalidated = true;
      return record(cudaErrorStreamCaptureImplicit);
    }
    stream->capture = event->captured;
    ++stream->capture->forked[stream].places;
    return cudaSuccess;
  }
  if (!event->last) return cudaSuccess;  // waiting for an event never recorded waits for nothing
  enqueue_locked(e, *stream, [] {}, {Dependency{event->last->stream, event->last->ticket}});
  return cudaSuccess;
}

// ---------------------------------------------------------------- capture and graphs

cudaError_t cudaStreamBeginCapture(cudaStream_t handle, cudaStreamCaptureMode mode) {
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  // The legacy stream cannot capture; only the global mode's rules are emulated.
  if (stream->legacy) return record(cudaErrorStreamCaptureUnsupported);
  if (mode != cudaStreamCaptureModeGlobal) return record(cudaErrorNotSupported);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (stream->capture) return record(cudaErrorIllegalState);
  stream->capture = std::make_shared<Capture>();
  stream->capture->origin = stream;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t handle, cudaGraph_t* graph) {
  if (graph == nullptr) return record(cudaErrorInvalidValue);
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (!stream->capture) return record(cudaErrorIllegalState);
  if (stream->capture->origin != stream) return record(cudaErrorStreamCaptureUnmatched);
  const std::shared_ptr<Capture> capture = std::move(stream->capture);
  stream->capture.reset();
  *graph = nullptr;
  // The forked streams leave the capture with the origin; one whose last place the origin never waited for is
  // unjoined, which CUDA refuses (a join through another forked stream is not followed here: refused too).
  bool unjoined = false;
  for (const auto& [forked, places] : capture->forked) {
    for (auto& [handle, live] : e.streams)
      if (live.get() == forked && live->capture == capture) live->capture.reset();
    unjoined = unjoined || places.joined < places.places;
  }
  if (capture->invalidated) return record(cudaErrorStreamCaptureInvalidated);
  if (unjoined) return record(cudaErrorStreamCaptureUnjoined);
  *graph = new CUgraph_st{capture->work};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t handle, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return record(cudaErrorInvalidValue);
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  *status = !stream->capture               ? cudaStreamCaptureStatusNone
            : stream->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                           : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (exec == nullptr || graph == nullptr || flags != 0) return record(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t handle) {
  if (exec == nullptr) return record(cudaErrorInvalidValue);
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = sticky_error(stream->device); sticky != cudaSuccess) return record(sticky);
  for (const lab::cuda::emu::WorkMaker& make : exec->work) enqueue(*stream, make());  // each node again, in order
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
