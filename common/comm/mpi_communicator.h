// The MPI backend of the Communicator: every operation on CPU tensors through Open MPI (and, in a CUDA
// build, on CUDA tensors staged through pinned host memory). Built with LAB_WITH_MPI.
//
// Each operation starts the non-blocking form of the MPI call and polls MPI_Test until it completes or
// the communicator's timeout passes, so a rank that never arrives makes the others fail with
// "rank R/S [mpi] all_reduce #N: timed out after ..." instead of hanging. Before each collective the
// ranks also check that they make the same call (operation, dtype, reduction, element count, root): MPI
// itself detects only some mismatches, and silently mixes up the others.
//
// Programs get the world's MpiCommunicator from World (world.h); groups come from split().
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/comm/communicator.h"
#ifdef LAB_WITH_CUDA
#include <array>

#include "common/cuda/pinned.h"
#endif

namespace lab::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (MPI_Comm_free when destroyed) and makes its errors return to the caller.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  std::string backend() const override { return "mpi"; }

  // The MPI communicator, for code that talks MPI itself (the NCCL backend splits it beside its own).
  MPI_Comm handle() const { return comm_; }

  // Whether each collective first checks that all ranks make the same call (on by default; a split
  // communicator inherits the setting). The check is one small all-reduce per collective: turn it off
  // only to time the collective alone.
  void set_verify_calls(bool verify) { verify_calls_ = verify; }
  bool verify_calls() const { return verify_calls_; }

  // What each rank says about a collective before it starts it: the fields the call check compares.
  struct CallSignature {
    OpKind kind = OpKind::Barrier;
    std::optional<DType> dtype = std::nullopt;
    std::optional<ReduceOp> op = std::nullopt;
    int64_t elements = 0;
    int root = -1;
  };
  // The call check of verify_calls(), collective over this communicator and bounded by its timeout:
  // InvalidArgument on every rank, naming what differs, when the ranks' calls differ; nothing when the
  // check is off. Public so that a backend whose library cannot check its calls (NCCL) checks them over
  // an MPI communicator of the same ranks. Its errors carry no "rank R/S [mpi] op #N" prefix: the caller's
  // operation adds its own.
  void agree(const CallSignature& call);
  // Returns when every rank has arrived at `call` (checking it as agree() does, or with an MPI_Ibarrier
  // when the check is off), or fails with Error(Comm) at the timeout: for calls that have no non-blocking
  // form to poll (MPI_Comm_split, ncclCommSplit), which then cannot hang.
  void rendezvous(const CallSignature& call);

 protected:
  bool supports(Device device) const override;
  void do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, const Tensor& output) override;
  void do_broadcast(const Tensor& tensor, int root) override;
  void do_barrier() override;
  void do_send(const Tensor& tensor, int peer, int tag) override;
  void do_recv(const Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  // Polls `request` until it completes; Error(Comm) when MPI reports an error or when the timeout passes
  // (`waiting_for` says for what: "all 4 ranks to call it").
  MPI_Status wait(MPI_Request& request, const std::string& waiting_for);

  // Host memory MPI reads and writes for a tensor: a CPU tensor's own memory, or for a CUDA tensor a
  // pinned staging buffer (slot 0 for outputs, 1 for inputs), filled from the device for inputs
  // (host_input, host_in_out) and copied back by copy_back() for outputs.
  void* host_input(const Tensor& tensor);
  void* host_output(const Tensor& tensor);
  void* host_in_out(const Tensor& tensor);
  void copy_back(const Tensor& tensor, const void* host);

  MPI_Comm comm_;
  bool verify_calls_ = true;
#ifdef LAB_WITH_CUDA
  std::array<cuda::PinnedBuffer, 2> staging_;  // grown to the largest tensor seen; reused across calls
#endif
};

}  // namespace lab::comm
