// One NCCL call of the stand-in as MPI performs it, on the communicator's `data` communicator.
//
// An operation owns the buffer MPI reads and writes. start() runs when the stream reaches the call, so it
// sees everything queued before it: it copies the inputs into that buffer and posts non-blocking MPI calls.
// finish() runs once they have all completed and copies the results out. So an operation abandoned by
// ncclCommAbort (MPI cannot withdraw a started collective) never writes into device memory afterwards, even
// if MPI completes it later.
//
// Reductions run in a wider type: 16-bit floats are widened to float, reduced in float and rounded once at
// the end (NCCL rounds at every step of its ring instead; both stay within the same bound of the exact sum).
// An average is the sum divided by the number of ranks. Everything else moves bytes.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda/emulation/nccl/state.h"

namespace lab::cuda::emu::nccl {

class Operation {
 public:
  explicit Operation(const char* name) : name_(name) {}
  virtual ~Operation() = default;
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  // Copies the inputs in and posts the MPI calls on `comm`; returns MPI's error code.
  virtual int start(MPI_Comm comm, int rank, int size) = 0;
  // Once every request has completed: copies the results out; an error message when they are wrong.
  virtual std::string finish(int size) = 0;

  const char* name() const { return name_; }
  std::vector<MPI_Request>& requests() { return requests_; }
  MPI_Status& status() { return status_; }  // of the request completed last

  // The communicator, and the operation's place in the order of its calls (calls.cpp sets both).
  std::shared_ptr<CommState> comm;
  uint64_t place = 0;

 protected:
  std::vector<std::byte> buffer_;
  std::vector<MPI_Request> requests_;
  MPI_Status status_{};

 private:
  const char* name_;  // "ncclAllReduce"
};

// The size in bytes of one element of `type` (a valid ncclDataType_t).
size_t element_size(ncclDataType_t type);
// True for the types the stand-in reduces: int32, float32, float16, bfloat16.
bool reducible(ncclDataType_t type);

// ncclAllReduce: `count` elements. ncclReduceScatter: `count` elements out of size * count in.
std::shared_ptr<Operation> all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op);
std::shared_ptr<Operation> reduce_scatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                                          ncclRedOp_t op);
// ncclAllGather: `bytes` from each rank, in rank order.
std::shared_ptr<Operation> all_gather(const void* send, void* recv, size_t bytes);
// ncclBroadcast: `bytes` from the root's send to every rank's recv (the root's own included).
std::shared_ptr<Operation> broadcast(const void* send, void* recv, size_t bytes, int root);
std::shared_ptr<Operation> send(const void* send, size_t bytes, int peer);
std::shared_ptr<Operation> receive(void* recv, size_t bytes, int peer);

}  // namespace lab::cuda::emu::nccl
