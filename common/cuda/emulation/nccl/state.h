// The NCCL stand-in's communicators (see include/nccl.h): what a handle points at, and the state its
// queued operations share.
//
// A handle (ncclComm_t) is freed by ncclCommDestroy or ncclCommAbort while operations of the communicator
// may still be queued on streams, so those operations hold the state, not the handle. Each communicator has
// two MPI communicators over its ranks: `data`, on which the stream threads run the operations, and
// `control`, on which the host thread runs ncclCommSplit at the same time (MPI forbids two threads to run
// collectives on one communicator at once).
//
// Operations start in the order they were issued on the host (`issued` hands out places, `started` counts
// the ones posted), whatever stream runs them: MPI matches collectives by their order on each rank.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

namespace lab::cuda::emu::nccl {

struct CommState {
  CommState(MPI_Comm data, int device);
  // Frees the MPI communicators, unless an abandoned operation may still use them (MPI cannot withdraw a
  // started collective) or MPI has already been finalised.
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  MPI_Comm data = MPI_COMM_NULL;
  MPI_Comm control = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int device = 0;

  std::mutex mutex;
  std::condition_variable changed;  // an operation started or stopped, or the communicator was aborted
  uint64_t issued = 0;              // places handed out, in the order of the host's calls
  uint64_t started = 0;             // operations past their turn (posted, or skipped)
  int running = 0;                  // operations posted and not yet finished or abandoned
  bool aborted = false;
  bool abandoned = false;  // an operation was left unfinished inside MPI
  ncclResult_t async_error = ncclSuccess;
};

// The parts of a message, streamed into one string.
template <typename... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Records the first asynchronous error of `comm` (later ones add nothing) and makes `message` the last
// error of the process. Callers do not hold comm.mutex.
void record_async_error(CommState& comm, ncclResult_t error, const std::string& message);

// MPI's description of an error code.
std::string mpi_error_text(int code);

// What ncclGetLastError returns: the message of the last error, in this process.
std::string last_error();

// Makes `message` what ncclGetLastError returns, and returns `result` (for `return fail(...)`).
ncclResult_t fail(ncclResult_t result, const std::string& message);

}  // namespace lab::cuda::emu::nccl

// What an ncclComm_t points at.
struct ncclComm {
  std::shared_ptr<lab::cuda::emu::nccl::CommState> state;
};
