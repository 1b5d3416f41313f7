// The NCCL backend of the Communicator: CUDA tensors of one GPU per rank, moved by NCCL (the toolkit's
// library, or in the emulation build its stand-in over MPI). Built with LAB_WITH_NCCL, which needs MPI:
//
//   - Bootstrap. NCCL ranks find each other through an ncclUniqueId that one rank makes and every other
//     rank receives: rank 0 makes it and broadcasts it over an MPI communicator of the same ranks, which the
//     NCCL communicator keeps for the call check and for split().
//   - Streams. Each operation runs on the communicator's own stream, after the work already queued on the
//     caller's current stream (an event orders it), and the host waits until it has completed, polling its
//     completion and NCCL's asynchronous error against the deadline. So when a call returns, its result is
//     in place for the host and for every stream, and a tensor may be freed or reused at once.
//     Queued (set_queued(true), for a step captured in a CUDA graph): collectives, sends and receives go on the
//     caller's current stream instead, and nothing waits until wait_queued(), which polls an event recorded
//     behind them against the deadline in the same way (barriers still wait).
//   - Failures. A timeout, an asynchronous error or a failed NCCL call aborts the NCCL communicator
//     (ncclCommAbort: the GPU stops waiting for the missing rank, and the stream moves on) and breaks this one.
//   - Calls are checked across ranks over MPI before each collective, as in the MPI backend
//     (set_verify_calls; on by default).
//   - NCCL has no message tags: messages between two ranks arrive in the order they were sent, and a receive
//     takes the next one, whatever its tag (the tag appears only in error messages).
//
// Programs get one through communicator_for() (device_communicator.h); groups come from split().
#pragma once

#include <nccl.h>

#include <memory>
#include <optional>
#include <string>

#include "common/comm/communicator.h"
#include "common/comm/mpi_communicator.h"
#include "common/cuda/stream.h"

namespace lab::comm {

class NcclCommunicator final : public Communicator {
 public:
  // An NCCL communicator over the ranks of `ranks`, for tensors on `device` (this rank's GPU). Collective
  // over `ranks`; the bootstrap waits for the other ranks at most for `ranks`' timeout, which the new
  // communicator takes too.
  NcclCommunicator(MpiCommunicator& ranks, Device device);
  // Destroys the NCCL communicator; aborts it instead while an exception unwinds the stack, because the
  // other ranks may then be somewhere else.
  ~NcclCommunicator() override;
  std::string backend() const override { return "nccl"; }

  Device device() const { return device_; }
  // The call check of each collective, as MpiCommunicator's (inherited by split communicators).
  void set_verify_calls(bool verify) { mpi_->set_verify_calls(verify); }
  bool verify_calls() const { return mpi_->verify_calls(); }
  // True once a failure has aborted the NCCL communicator (every later call fails: it is broken).
  bool aborted() const { return comm_ == nullptr; }
  bool can_queue() const override { return true; }

 protected:
  bool supports(Device device) const override { return device == device_; }
  void do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, const Tensor& output) override;
  void do_broadcast(const Tensor& tensor, int root) override;
  void do_barrier() override;
  void do_send(const Tensor& tensor, int peer, int tag) override;
  void do_recv(const Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  void do_wait_queued() override;

 private:
  // Whether a call may be left queued on the caller's stream when the communicator is queued().
  enum class Completion { QueuedIfAsked, Waited };

  // A group of split(): the MPI communicator of its ranks and the NCCL communicator ncclCommSplit made.
  NcclCommunicator(std::unique_ptr<MpiCommunicator> mpi, ncclComm_t comm, Device device);
  void create_events();

  // The MPI communicator of the same ranks, with this communicator's timeout, for the call check.
  MpiCommunicator& checker();
  // Runs `body`; a communication failure (Error(Comm)) aborts the NCCL communicator on its way out.
  template <typename Body>
  void aborting_on_failure(Body&& body);
  // Checks the call across ranks, then launches it (below) and waits for every rank.
  template <typename Enqueue>
  void collective(const MpiCommunicator::CallSignature& call, Enqueue&& enqueue,
                  Completion completion = Completion::QueuedIfAsked);
  // Queues `enqueue(stream)` (one NCCL call) on the communicator's stream after the caller's current
  // stream's work, then waits for it (`waiting_for` says for what, in a timeout's message); or, queued(),
  // on the caller's current stream without waiting.
  template <typename Enqueue>
  void launch(const std::string& waiting_for, Enqueue&& enqueue, Completion completion);
  // Polls the completion of the launched call and NCCL's asynchronous error until it completes; Error(Comm)
  // on an asynchronous error or at the timeout.
  void wait_for_completion(const std::string& waiting_for);
  void abort() noexcept;

  Device device_;
  std::unique_ptr<MpiCommunicator> mpi_;
  cuda::Stream stream_;
  std::optional<cuda::Event> ready_;  // recorded on the caller's stream: the inputs are ready
  std::optional<cuda::Event> done_;   // recorded on stream_ after the NCCL call (queued: on the caller's stream)
  ncclComm_t comm_ = nullptr;         // null once aborted
};

}  // namespace lab::comm
