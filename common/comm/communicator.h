// Communicator: the collectives and point-to-point operations that distributed training is built from,
// over lab::Tensor, behind one interface with several backends (single process here; MPI and NCCL
// beside it, see DESIGN.md in this folder).
//
// Rules every backend shares (and this base class enforces before a backend sees a call):
//   - Collectives are called by every rank of the communicator, in the same order; each call gets the
//     next sequence number, so the numbers agree across ranks and name the call that went wrong.
//   - Tensors are contiguous (all lab::Tensors are) and on a device the backend supports; inputs and
//     outputs have the same dtype and device, and are either the very same memory (in place) or do not
//     overlap at all.
//   - Chunked collectives use equal blocks in rank order: reduce_scatter gives rank r block r of the
//     reduced input; all_gather puts rank r's input in block r of the output. Callers pad to a multiple
//     of size() (as MPI_Reduce_scatter_block and ncclReduceScatter require).
//   - Every error is a lab::Error whose message starts with "rank R/S [backend] op #N:". After a
//     communication failure (Error(Comm), a timeout included) the communicator is broken: each later call
//     fails at once, because ranks can no longer agree on where they are.
//   - One thread at a time issues the operations of a communicator. Concurrent streams of operations
//     (communication overlapped with compute) use a second communicator from split().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/core/tensor.h"

namespace lab::comm {

enum class ReduceOp { Sum, Avg, Max };
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max"

// The operations of a communicator, for error messages and traffic counters.
enum class OpKind { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier, Send, Recv, Split };
inline constexpr int kOpKinds = 8;
const char* op_kind_name(OpKind kind);  // "all_reduce", "reduce_scatter", ...

// What one kind of operation has moved on a communicator: completed calls, and their payload in bytes as
// nccl-tests counts it (the all-reduced or broadcast tensor, the whole reduce-scatter input, the whole
// all-gather output, the tensor sent or received), identical on every rank of a collective.
struct OpTraffic {
  uint64_t calls = 0;
  uint64_t bytes = 0;
};

// The bytes each rank sends (and receives) per payload byte with the ring algorithms that NCCL and MPI
// use for large messages: all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast, send and
// recv 1, barrier and split 0. Payload bytes times this factor is the traffic through each rank's link;
// bandwidth (payload / time) times it is nccl-tests' "bus bandwidth", comparable with the link's speed.
double bus_factor(OpKind kind, int ranks);

// The color for split() of a rank that joins no group (MPI_UNDEFINED).
inline constexpr int kNoGroup = -1;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"

  // ---- collectives
  // All ranks' tensors reduced elementwise into every rank's tensor (in place), or into `output`.
  // Sum and max on f32, bf16, f16 and i32; avg (the sum divided by size()) on the floating dtypes.
  void all_reduce(const Tensor& tensor, ReduceOp op);
  void all_reduce(const Tensor& input, const Tensor& output, ReduceOp op);
  // `input` (size() * n elements) reduced across ranks; this rank receives block rank() in `output` (n).
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op);
  // Each rank's `input` (n elements) gathered in rank order into `output` (size() * n) on every rank.
  void all_gather(const Tensor& input, const Tensor& output);
  // In place: block rank() of `buffer` is this rank's input; afterwards every block is filled (ZeRO's
  // parameter gather: each rank updated its own shard of the flat buffer).
  void all_gather(const Tensor& buffer);
  // Rank `root`'s tensor copied into the tensor of every other rank.
  void broadcast(const Tensor& tensor, int root);
  // Returns when every rank has called it.
  void barrier();

  // ---- point to point (blocking; pipeline parallelism). `peer` is another rank; messages between two
  // ranks with the same tag arrive in the order they were sent.
  void send(const Tensor& tensor, int peer, int tag = 0);
  void recv(const Tensor& tensor, int peer, int tag = 0);

  // ---- groups
  // Collective: ranks calling with the same color form a new communicator, ranked by `key` (ties by the
  // rank here), as MPI_Comm_split. A rank calling with kNoGroup gets nullptr. The new communicator
  // inherits the timeout and starts its own sequence numbers.
  std::unique_ptr<Communicator> split(int color, int key);

  // ---- queueing on the device (a distributed step captured in a CUDA graph)
  // By default an operation has completed when it returns. A backend that runs on a device stream (NCCL:
  // can_queue()) may instead queue each collective, send and receive on the caller's current stream and return
  // at once (set_queued(true)), as the stream's kernels are queued: what reads a result must be queued on that
  // stream after it, and a tensor must outlive the operations queued on it. Then a CUDA graph can capture them
  // with the kernels around them and replay them. The host learns of a failure or a hang only in wait_queued().
  // Barriers and splits still complete before they return.
  virtual bool can_queue() const { return false; }
  void set_queued(bool queued);  // InvalidArgument where !can_queue()
  bool queued() const { return queued_; }
  // Queues from now on where the backend can; a group of one rank that cannot has nothing to queue anyway.
  void queue_where_able() {
    if (can_queue()) set_queued(true);
  }
  // Why a step whose operations on this group are `what` (plural: "tensor parallelism's all-reduces") cannot be
  // captured in a CUDA graph: a group of more than one rank that completes them on the host. "" when it can be.
  std::string capture_blocker(std::string_view what) const;
  // Returns when everything queued so far on the caller's current stream has completed, waiting at most the
  // timeout; Error(Comm) on a failure or a timeout, which breaks the communicator. Returns at once when not
  // queued.
  void wait_queued();

  // How long one blocking operation may wait for the other ranks before it fails with Error(Comm).
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Operations issued so far on this communicator (the last one's sequence number).
  uint64_t sequence() const { return sequence_; }

  // Completed operations of one kind and their payload bytes since construction or reset_traffic(); a
  // benchmark reads them around a step to report the bytes it communicated.
  const OpTraffic& traffic(OpKind kind) const { return traffic_[static_cast<int>(kind)]; }
  void reset_traffic() { traffic_ = {}; }

 protected:
  Communicator(int rank, int size);

  // True when `a` and `b` are the same memory: the in-place form of an operation (MPI_IN_PLACE).
  static bool same_memory(const Tensor& a, const Tensor& b);

  // ---- what a backend implements. Arguments arrive validated (shapes, dtypes, devices, ranks, overlap).
  virtual bool supports(Device device) const = 0;
  // `input` and `output` may be the same memory (in place).
  virtual void do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  virtual void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  // `input` may be block rank() of `output` (in place).
  virtual void do_all_gather(const Tensor& input, const Tensor& output) = 0;
  virtual void do_broadcast(const Tensor& tensor, int root) = 0;
  virtual void do_barrier() = 0;
  virtual void do_send(const Tensor& tensor, int peer, int tag) = 0;
  virtual void do_recv(const Tensor& tensor, int peer, int tag) = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key) = 0;
  // Waits for the caller's current stream (only called while queued()).
  virtual void do_wait_queued() {}

 private:
  // Numbers the call, checks the communicator is not broken, runs `body` (which returns the payload
  // bytes of the call), counts it, and rethrows any error with the rank, backend, op and sequence number
  // in front.
  template <typename Body>
  void run(OpKind kind, Body&& body);

  void check_tensor(const Tensor& t, const char* what) const;
  void check_pair(const Tensor& input, const Tensor& output) const;
  void check_reducible(DType dtype, ReduceOp op) const;
  void check_peer(int peer, const char* direction) const;

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_{std::chrono::minutes(10)};
  uint64_t sequence_ = 0;
  std::array<OpTraffic, kOpKinds> traffic_{};
  std::string broken_by_;  // the failed operation that broke this communicator; empty while healthy
  bool queued_ = false;
};

}  // namespace lab::comm
