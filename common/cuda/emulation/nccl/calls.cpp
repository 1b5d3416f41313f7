// The stand-in's operations as the API takes them: the argument checks NCCL makes, groups, and the work
// item that runs a stream's share of a call (or of a group) when the stream reaches it:
//
//   1. each operation waits for its turn on its communicator (the order of the host's calls), copies its
//      inputs and posts its MPI calls (operations.h);
//   2. the item then polls all of them together, so the sends and receives of a group progress at once,
//      and copies each one's results out when it completes;
//   3. an MPI error, or a message of the wrong size, becomes the communicator's asynchronous error;
//      ncclCommAbort makes a waiting operation give up (it is kept, with its buffer, for MPI to finish or
//      not) so that the stream moves on.
// A call captured in a CUDA graph is made again at every launch of the graph: a fresh operation, with its turn
// taken at the launch.
#include <chrono>
#include <climits>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/memory.h"
#include "common/cuda/emulation/nccl/operations.h"
#include "common/cuda/emulation/nccl/state.h"
#include "common/cuda/emulation/streams.h"

using namespace lab::cuda::emu;
using namespace lab::cuda::emu::nccl;

namespace {

using Clock = std::chrono::steady_clock;
using Operations = std::vector<std::shared_ptr<Operation>>;

// ---------------------------------------------------------------- running on a stream

// Operations given up (after ncclCommAbort or an MPI error), with the buffers MPI may still write: never
// freed.
void bury(std::shared_ptr<Operation> operation) {
  static std::mutex* const mutex = new std::mutex;
  static auto* const graveyard = new Operations;
  std::lock_guard<std::mutex> lock(*mutex);
  graveyard->push_back(std::move(operation));
}

// An MPI error of `op` as its communicator's asynchronous error: a truncated message is a usage error (the
// ranks passed different counts), anything else a system error.
void record_mpi_failure(Operation& op, int code) {
  int error_class = code;
  MPI_Error_class(code, &error_class);
  const bool truncated = error_class == MPI_ERR_TRUNCATE;
  record_async_error(
      *op.comm, truncated ? ncclInvalidUsage : ncclSystemError,
      text(op.name(), ": MPI reported ", mpi_error_text(code),
           truncated ? " (a message was longer than its receive: the ranks passed different counts)" : ""));
}

// Waits for the operation's turn, then posts it (or skips it, on a communicator that was aborted or has
// failed). True when it was posted.
bool post_in_turn(Operation& op) {
  CommState& comm = *op.comm;
  std::unique_lock<std::mutex> lock(comm.mutex);
  comm.changed.wait(lock, [&] { return comm.aborted || comm.started == op.place; });
  bool posted = !comm.aborted && comm.async_error == ncclSuccess;
  if (posted) {
    ++comm.running;  // from here on, ncclCommAbort waits for this operation to give up
    // Only this operation's turn lets the MPI calls be posted, so no lock is needed while posting.
    lock.unlock();
    const int code = op.start(comm.data, comm.rank, comm.size);
    if (code != MPI_SUCCESS) {
      record_mpi_failure(op, code);
      posted = false;
    }
    lock.lock();
    if (!posted) --comm.running;
  }
  ++comm.started;
  comm.changed.notify_all();
  return posted;
}

void stop_running(CommState& comm) {
  std::lock_guard<std::mutex> lock(comm.mutex);
  --comm.running;
  comm.changed.notify_all();
}

bool is_aborted(CommState& comm) {
  std::lock_guard<std::mutex> lock(comm.mutex);
  return comm.aborted;
}

// Tests the operation's requests: true when all have completed; MPI's error code in `code`.
bool completed(Operation& op, int& code) {
  code = MPI_SUCCESS;
  for (MPI_Request& request : op.requests()) {
    if (request == MPI_REQUEST_NULL) continue;
    int done = 0;
    code = MPI_Test(&request, &done, &op.status());
    if (code != MPI_SUCCESS || !done) return false;
  }
  return true;
}

// A running operation's end: it completed, failed, or was given up after an abort.
void poll(Operations& running) {
  const Clock::time_point start = Clock::now();
  while (!running.empty()) {
    for (auto it = running.begin(); it != running.end();) {
      Operation& op = **it;
      CommState& comm = *op.comm;
      int code = MPI_SUCCESS;
      if (is_aborted(comm)) {
        {
          std::lock_guard<std::mutex> lock(comm.mutex);
          comm.abandoned = true;
        }
        bury(*it);
      } else if (completed(op, code)) {
        if (std::string wrong = op.finish(comm.size); !wrong.empty()) record_async_error(comm, ncclInvalidUsage, wrong);
      } else if (code != MPI_SUCCESS) {
        record_mpi_failure(op, code);
        bury(*it);
      } else {
        ++it;
        continue;
      }
      stop_running(comm);
      it = running.erase(it);
    }
    // As a GPU kernel spins: hard at first, then leaving the core to the rank's other threads.
    if (!running.empty()) {
      if (Clock::now() - start < std::chrono::milliseconds(1))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// The work item of one stream: its operations of one call or group.
void perform(const Operations& operations) {
  Operations running;
  for (const std::shared_ptr<Operation>& op : operations)
    if (post_in_turn(*op)) running.push_back(op);
  poll(running);
}

// ---------------------------------------------------------------- queueing, and groups

// A call made: its stream, its communicator, and what makes its operation. An operation runs once (it owns
// its buffer and requests), so each time a stream queues the call, a fresh one is made: once for a call made
// outside a capture, and at every launch of a graph that captured it.
struct Queued {
  CUstream_st* stream;
  std::shared_ptr<CommState> comm;
  std::function<std::shared_ptr<Operation>()> make;
};

thread_local int t_group_depth = 0;
thread_local std::vector<Queued> t_group;

// Queues one work item per stream for its calls. Each time the item is made (at the call, or at a graph's
// launch: in the host's order either way), its operations get their places on their communicators, in the
// order of the calls, which is the order every rank makes them in.
void launch(const std::vector<Queued>& calls) {
  std::vector<std::pair<CUstream_st*, std::vector<Queued>>> per_stream;
  for (const Queued& call : calls) {
    auto it = per_stream.begin();
    while (it != per_stream.end() && it->first != call.stream) ++it;
    if (it == per_stream.end()) it = per_stream.insert(per_stream.end(), {call.stream, {}});
    it->second.push_back(call);
  }
  for (auto& [stream, made] : per_stream)
    enqueue_made(*stream, [made]() -> std::function<void()> {
      Operations operations;
      for (const Queued& call : made) {
        std::shared_ptr<Operation> operation = call.make();
        operation->comm = call.comm;
        {
          std::lock_guard<std::mutex> lock(call.comm->mutex);
          operation->place = call.comm->issued++;
        }
        operations.push_back(std::move(operation));
      }
      return [operations] { perform(operations); };
    });
}

ncclResult_t submit(CUstream_st* stream, ncclComm_t comm, std::function<std::shared_ptr<Operation>()> make) {
  Queued call{stream, comm->state, std::move(make)};
  if (t_group_depth > 0)
    t_group.push_back(std::move(call));
  else
    launch({std::move(call)});
  return ncclSuccess;
}

// ---------------------------------------------------------------- argument checks

// The checks of every operation: a communicator, a datatype, a stream of the communicator's device that
// has not faulted. `stream` receives the resolved stream.
ncclResult_t check_call(const char* call, ncclComm_t comm, ncclDataType_t type, cudaStream_t handle,
                        CUstream_st*& stream) {
  if (comm == nullptr) return fail(ncclInvalidArgument, text(call, ": comm is NULL"));
  if (type < 0 || type >= ncclNumTypes)
    return fail(ncclInvalidArgument, text(call, ": invalid datatype ", static_cast<int>(type)));
  stream = resolve_stream(handle);
  if (stream == nullptr) return fail(ncclInvalidArgument, text(call, ": invalid stream"));
  const int device = comm->state->device;
  if (stream_device(*stream) != device)
    return fail(ncclInvalidArgument, text(call, ": the stream is on device ", stream_device(*stream),
                                          ", the communicator on device ", device));
  if (sticky_error(device) != cudaSuccess)
    return fail(ncclUnhandledCudaError,
                text(call, ": device ", device, " has faulted: ", cudaGetErrorName(sticky_error(device))));
  return ncclSuccess;
}

// A buffer of `bytes` must lie inside one device allocation of the communicator's device, as NCCL checks
// with the pointer's attributes.
ncclResult_t check_buffer(const char* call, const char* name, const void* buffer, size_t bytes, ncclComm_t comm) {
  const std::optional<Allocation> allocation = find_allocation(buffer);
  if (!allocation || allocation->kind != MemoryKind::Device)
    return fail(ncclInvalidArgument, text(call, ": ", name, " ", buffer, " is not device memory"));
  if (allocation->device != comm->state->device)
    return fail(ncclInvalidArgument, text(call, ": ", name, " is memory of device ", allocation->device,
                                          ", the communicator's device is ", comm->state->device));
  if (!inside(*allocation, buffer, bytes))
    return fail(ncclInvalidArgument, text(call, ": ", name, " ", buffer, ": ", bytes,
                                          " bytes from there run past the end of its allocation"));
  return ncclSuccess;
}

// MPI counts are ints: the stand-in moves at most INT_MAX bytes (or reduces INT_MAX elements) per call.
ncclResult_t check_size(const char* call, size_t units) {
  if (units > static_cast<size_t>(INT_MAX))
    return fail(ncclInvalidArgument,
                text(call, ": ", units, " is more than the stand-in's MPI counts allow (", INT_MAX, ")"));
  return ncclSuccess;
}

ncclResult_t check_reduction(const char* call, ncclDataType_t type, ncclRedOp_t op) {
  if (!reducible(type))
    return fail(ncclInvalidArgument, text(call,
                                          ": the stand-in reduces int32, float32, float16 and bfloat16, not "
                                          "datatype ",
                                          static_cast<int>(type)));
  if (op < 0 || op >= ncclNumOps)
    return fail(ncclInvalidArgument, text(call, ": invalid reduction ", static_cast<int>(op)));
  return ncclSuccess;
}

ncclResult_t check_rank(const char* call, const char* what, int rank, ncclComm_t comm) {
  if (rank < 0 || rank >= comm->state->size)
    return fail(ncclInvalidArgument, text(call, ": ", what, " ", rank, " is not in [0, ", comm->state->size, ")"));
  return ncclSuccess;
}

}  // namespace

// ---------------------------------------------------------------- the API
// Each call checks its arguments in NCCL's order and returns the first failure; a call that moves nothing
// (a count of 0) returns at once, as in NCCL.

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclAllReduce";
  CUstream_st* resolved = nullptr;
  ncclResult_t r = check_call(call, comm, datatype, stream, resolved);
  if (r == ncclSuccess) r = check_reduction(call, datatype, op);
  if (r == ncclSuccess) r = check_size(call, count);
  if (r != ncclSuccess || count == 0) return r;
  const size_t bytes = count * element_size(datatype);
  r = check_buffer(call, "sendbuff", sendbuff, bytes, comm);
  if (r == ncclSuccess) r = check_buffer(call, "recvbuff", recvbuff, bytes, comm);
  if (r != ncclSuccess) return r;
  return submit(resolved, comm, [=] { return nccl::all_reduce(sendbuff, recvbuff, count, datatype, op); });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclReduceScatter";
  CUstream_st* resolved = nullptr;
  ncclResult_t r = check_call(call, comm, datatype, stream, resolved);
  if (r == ncclSuccess) r = check_reduction(call, datatype, op);
  if (r == ncclSuccess) r = check_size(call, recvcount);
  if (r != ncclSuccess || recvcount == 0) return r;
  const size_t bytes = recvcount * element_size(datatype);
  r = check_buffer(call, "sendbuff", sendbuff, bytes * static_cast<size_t>(comm->state->size), comm);
  if (r == ncclSuccess) r = check_buffer(call, "recvbuff", recvbuff, bytes, comm);
  if (r != ncclSuccess) return r;
  return submit(resolved, comm, [=] { return nccl::reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op); });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclAllGather";
  CUstream_st* resolved = nullptr;
  ncclResult_t r = check_call(call, comm, datatype, stream, resolved);
  const size_t bytes = sendcount * element_size(datatype);
  if (r == ncclSuccess) r = check_size(call, bytes * static_cast<size_t>(comm->state->size));
  if (r != ncclSuccess || bytes == 0) return r;
  r = check_buffer(call, "sendbuff", sendbuff, bytes, comm);
  if (r == ncclSuccess)
    r = check_buffer(call, "recvbuff", recvbuff, bytes * static_cast<size_t>(comm->state->size), comm);
  if (r != ncclSuccess) return r;
  return submit(resolved, comm, [=] { return nccl::all_gather(sendbuff, recvbuff, bytes); });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclBroadcast";
  CUstream_st* resolved = nullptr;
  ncclResult_t r = check_call(call, comm, datatype, stream, resolved);
  if (r == ncclSuccess) r = check_rank(call, "root", root, comm);
  const size_t bytes = count * element_size(datatype);
  if (r == ncclSuccess) r = check_size(call, bytes);
  if (r != ncclSuccess || bytes == 0) return r;
  if (comm->state->rank == root) r = check_buffer(call, "sendbuff", sendbuff, bytes, comm);  // only the root reads it
  if (r == ncclSuccess) r = check_buffer(call, "recvbuff", recvbuff, bytes, comm);
  if (r != ncclSuccess) return r;
  return submit(resolved, comm, [=] { return nccl::broadcast(sendbuff, recvbuff, bytes, root); });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const char* call = "ncclSend";
  CUstream_st* resolved = nullptr;
  ncclResult_t r = check_call(call, comm, datatype, stream, resolved);
  if (r == ncclSuccess) r = check_rank(call, "peer", peer, comm);
  const size_t bytes = count * element_size(datatype);
  if (r == ncclSuccess) r = check_size(call, bytes);
  if (r != ncclSuccess || bytes == 0) return r;
  r = check_buffer(call, "sendbuff", sendbuff, bytes, comm);
  if (r != ncclSuccess) return r;
  return submit(resolved, comm, [=] { return nccl::send(sendbuff, bytes, peer); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const char* call = "ncclRecv";
  CUstream_st* resolved = nullptr;
  ncclResult_t r = check_call(call, comm, datatype, stream, resolved);
  if (r == ncclSuccess) r = check_rank(call, "peer", peer, comm);
  const size_t bytes = count * element_size(datatype);
  if (r == ncclSuccess) r = check_size(call, bytes);
  if (r != ncclSuccess || bytes == 0) return r;
  r = check_buffer(call, "recvbuff", recvbuff, bytes, comm);
  if (r != ncclSuccess) return r;
  return submit(resolved, comm, [=] { return nccl::receive(recvbuff, bytes, peer); });
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  if (--t_group_depth > 0) return ncclSuccess;
  launch(std::exchange(t_group, {}));
  return ncclSuccess;
}
