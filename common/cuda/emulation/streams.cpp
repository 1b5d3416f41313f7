// Streams and events (see streams.h), and their runtime calls.
#include "common/cuda/emulation/streams.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda/emulation/device.h"

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

}  // namespace

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
};

struct CUevent_st {
  int device = 0;
  bool timing = true;
  std::shared_ptr<EventRecord> last;  // null until recorded
};

namespace lab::cuda::emu {

namespace {

// One lock for all queues: enqueues are short, and the legacy stream's rules need a consistent view of all.
struct Engine {
  std::mutex mutex;
  std::condition_variable progress;                              // any item completed
  std::map<CUstream_st*, std::shared_ptr<CUstream_st>> streams;  // created streams
  std::vector<std::shared_ptr<CUstream_st>> legacy;              // per device, created on first use
  std::map<CUevent_st*, std::unique_ptr<CUevent_st>> events;
};

// Never destroyed: stream threads wait on its mutex until the process ends.
Engine& engine() {
  static Engine* const e = [] {
    auto* created = new Engine;
    created->legacy.resize(static_cast<size_t>(device_count()));
    return created;
  }();
  return *e;
}

bool done(const CUstream_st& stream, uint64_t ticket) {
  return stream.completed >= ticket;
}

void work_through(CUstream_st* stream) {
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

uint64_t enqueue_locked(Engine& e, CUstream_st& stream, std::function<void()> work, std::vector<Dependency> after) {
  std::vector<Dependency> implicit = implicit_dependencies(e, stream);
  after.insert(after.end(), implicit.begin(), implicit.end());
  stream.queue.push_back(WorkItem{std::move(work), std::move(after)});
  stream.has_work.notify_one();
  return ++stream.queued;
}

CUevent_st* resolve_event(Engine& e, cudaEvent_t handle) {
  const auto it = e.events.find(handle);
  return it == e.events.end() ? nullptr : it->second.get();
}

}  // namespace

CUstream_st* resolve_stream(cudaStream_t handle) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (handle == nullptr || handle == cudaStreamLegacy) {
    const int device = current_device();
    if (!valid_device(device)) return nullptr;
    auto& legacy = e.legacy[static_cast<size_t>(device)];
    if (!legacy) legacy = start_stream(device, true, true);
    return legacy.get();
  }
  return e.streams.contains(handle) ? handle : nullptr;
}

int stream_device(const CUstream_st& stream) {
  return stream.device;
}

uint64_t enqueue(CUstream_st& stream, std::function<void()> work) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  return enqueue_locked(e, stream, std::move(work), {});
}

void wait_for(CUstream_st& stream, uint64_t ticket) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  e.progress.wait(lock, [&] { return done(stream, ticket); });
}

void synchronize_device(int device) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  std::vector<Dependency> pending;
  for (const auto& [handle, stream] : e.streams)
    if (stream->device == device) pending.push_back({stream, stream->queued});
  if (const auto& legacy = e.legacy[static_cast<size_t>(device)]) pending.push_back({legacy, legacy->queued});
  e.progress.wait(lock, [&] {
    for (const Dependency& d : pending)
      if (!done(*d.stream, d.ticket)) return false;
    return true;
  });
}

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
  // An empty item waits for everything the stream's rules order before it (for the legacy stream: the
  // blocking streams' work too), so waiting for it is waiting for all that.
  wait_for(*stream, enqueue(*stream, [] {}));
  return record(sticky_error(stream->device));
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
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
  enqueue(*stream, [fn, user_data] { fn(user_data); });
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
  auto rec = std::make_shared<EventRecord>();
  rec->stream = owner_of(e, stream);
  rec->ticket = enqueue_locked(e, *stream, [rec] { rec->ran_at = Clock::now(); }, {});
  event->last = std::move(rec);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t handle) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mutex);
  const CUevent_st* event = resolve_event(e, handle);
  if (event == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = sticky_error(event->device); sticky != cudaSuccess) return record(sticky);
  if (event->last && !done(*event->last->stream, event->last->ticket)) return cudaErrorNotReady;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle) {
  Engine& e = engine();
  std::unique_lock<std::mutex> lock(e.mutex);
  const CUevent_st* event = resolve_event(e, handle);
  if (event == nullptr) return record(cudaErrorInvalidResourceHandle);
  const std::shared_ptr<EventRecord> rec = event->last;
  const int device = event->device;
  if (rec) e.progress.wait(lock, [&] { return done(*rec->stream, rec->ticket); });
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
  if (!event->last) return cudaSuccess;  // waiting for an event never recorded waits for nothing
  enqueue_locked(e, *stream, [] {}, {Dependency{event->last->stream, event->last->ticket}});
  return cudaSuccess;
}
