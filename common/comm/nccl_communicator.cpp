// The NCCL backend: the bootstrap over MPI, each operation as one NCCL call on the communicator's stream,
// the wait for it against the deadline, and the abort after a failure.
#include "common/comm/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <exception>

#include "common/comm/mpi_runtime.h"
#include "common/comm/nccl_check.h"
#include "common/comm/waiting.h"
#include "common/cuda/runtime.h"

namespace lab::comm {

using Clock = std::chrono::steady_clock;

namespace {

ncclDataType_t nccl_datatype(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    // NCCL has no 16-bit integer. u16 tensors (tokens) are only moved, never reduced (the base class
    // refuses), and moving copies the bits unchanged: they travel as 16-bit floats.
    case DType::U16: return ncclFloat16;
  }
  fail(ErrorKind::Internal, "no NCCL datatype for dtype ", static_cast<int>(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  fail(ErrorKind::Internal, "no NCCL reduction for ", reduce_op_name(op));
}

size_t count(const Tensor& tensor) {
  return static_cast<size_t>(tensor.numel());
}

// A communicator of its own over `ranks` (a split with the rendezvous and timeout of `ranks`), so that the
// bootstrap and the call check never mix with the caller's MPI traffic.
std::unique_ptr<MpiCommunicator> own_copy(MpiCommunicator& ranks) {
  std::unique_ptr<Communicator> copy = ranks.split(0, ranks.rank());
  return std::unique_ptr<MpiCommunicator>(&dynamic_cast<MpiCommunicator&>(*copy.release()));
}

Device checked_gpu(Device device) {
  LAB_CHECK(device.is_cuda(), InvalidArgument, "the NCCL backend communicates CUDA tensors, not ", device.str());
  cuda::check_device_index(device.index);
  return device;
}

// The id travels as a tensor of int32 through the MPI communicator's broadcast (and its timeout).
constexpr int64_t kIdInts = sizeof(ncclUniqueId) / sizeof(int32_t);
static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0);

}  // namespace

// ---------------------------------------------------------------- lifetime

NcclCommunicator::NcclCommunicator(MpiCommunicator& ranks, Device device)
    : Communicator(ranks.rank(), ranks.size()),
      device_(checked_gpu(device)),
      mpi_(own_copy(ranks)),
      stream_(device.index) {
  set_timeout(ranks.timeout());
  create_events();
  Tensor id = Tensor::zeros({kIdInts}, DType::I32);
  if (rank() == 0) {
    ncclUniqueId made;
    NCCL_CHECK(ncclGetUniqueId(&made));
    std::memcpy(id.raw(), &made, sizeof(made));
  }
  mpi_->broadcast(id, 0);
  ncclUniqueId shared;
  std::memcpy(&shared, id.raw(), sizeof(shared));
  cuda::DeviceGuard on(device_.index);
  NCCL_CHECK(ncclCommInitRank(&comm_, size(), shared, rank()));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<MpiCommunicator> mpi, ncclComm_t comm, Device device)
    : Communicator(mpi->rank(), mpi->size()),
      device_(device),
      mpi_(std::move(mpi)),
      stream_(device.index),
      comm_(comm) {
  create_events();
}

void NcclCommunicator::create_events() {
  cuda::DeviceGuard on(device_.index);
  ready_.emplace(false);
  done_.emplace(false);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  if (std::uncaught_exceptions() > 0)
    ncclCommAbort(comm_);
  else
    ncclCommDestroy(comm_);
}

void NcclCommunicator::abort() noexcept {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

// ---------------------------------------------------------------- launching and waiting

MpiCommunicator& NcclCommunicator::checker() {
  mpi_->set_timeout(timeout());
  return *mpi_;
}

template <typename Body>
void NcclCommunicator::aborting_on_failure(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Comm) throw;
    abort();
    throw Error(ErrorKind::Comm, cat(e.what(), "; the NCCL communicator is aborted"));
  }
}

template <typename Enqueue>
void NcclCommunicator::collective(const MpiCommunicator::CallSignature& call, Enqueue&& enqueue,
                                  Completion completion) {
  aborting_on_failure([&] {
    checker().agree(call);
    launch(every_rank(rank(), size()), enqueue, completion);
  });
}

template <typename Enqueue>
void NcclCommunicator::launch(const std::string& waiting_for, Enqueue&& enqueue, Completion completion) {
  cuda::DeviceGuard on(device_.index);
  if (queued() && completion == Completion::QueuedIfAsked) {
    enqueue(cuda::current_stream(device_.index));  // ordered by the stream itself; wait_queued() checks on it
    return;
  }
  ready_->record();  // on the caller's current stream, behind the work that produces the inputs
  stream_.wait(*ready_);
  enqueue(stream_.get());
  done_->record(stream_);
  wait_for_completion(waiting_for);
}

void NcclCommunicator::do_wait_queued() {
  aborting_on_failure([&] {
    cuda::DeviceGuard on(device_.index);
    done_->record();  // on the caller's current stream, behind the queued collectives
    wait_for_completion("the collectives queued on the stream (every rank must queue the same ones)");
  });
}

void NcclCommunicator::wait_for_completion(const std::string& waiting_for) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout();
  while (true) {
    // Completion first, then the error: a call that failed may still count as completed.
    const bool completed = done_->query();
    ncclResult_t async_error = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_error));
    LAB_CHECK(async_error == ncclSuccess, Comm, "NCCL reported an asynchronous error: ", nccl_result_text(async_error));
    if (completed) return;
    const Clock::time_point now = Clock::now();
    LAB_CHECK(now < deadline, Comm, "timed out after ", timeout().count(), " ms waiting for ", waiting_for);
    pause_before_next_poll(now - start);
  }
}

// ---------------------------------------------------------------- collectives

void NcclCommunicator::do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) {
  collective({.kind = OpKind::AllReduce, .dtype = input.dtype(), .op = op, .elements = input.numel()},
             [&](cudaStream_t stream) {
               NCCL_CHECK(ncclAllReduce(input.raw(), output.raw(), count(output), nccl_datatype(output.dtype()),
                                        nccl_op(op), comm_, stream));
             });
}

void NcclCommunicator::do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  collective({.kind = OpKind::ReduceScatter, .dtype = input.dtype(), .op = op, .elements = output.numel()},
             [&](cudaStream_t stream) {
               NCCL_CHECK(ncclReduceScatter(input.raw(), output.raw(), count(output), nccl_datatype(output.dtype()),
                                            nccl_op(op), comm_, stream));
             });
}

// In place (input is block rank() of output) is NCCL's own in-place form: sendbuff == recvbuff + rank * count.
void NcclCommunicator::do_all_gather(const Tensor& input, const Tensor& output) {
  collective({.kind = OpKind::AllGather, .dtype = input.dtype(), .elements = input.numel()}, [&](cudaStream_t stream) {
    NCCL_CHECK(ncclAllGather(input.raw(), output.raw(), count(input), nccl_datatype(input.dtype()), comm_, stream));
  });
}

void NcclCommunicator::do_broadcast(const Tensor& tensor, int root) {
  collective({.kind = OpKind::Broadcast, .dtype = tensor.dtype(), .elements = tensor.numel(), .root = root},
             [&](cudaStream_t stream) {
               NCCL_CHECK(ncclBroadcast(tensor.raw(), tensor.raw(), count(tensor), nccl_datatype(tensor.dtype()), root,
                                        comm_, stream));
             });
}

// NCCL has no barrier: a sum of one element completes only when every rank has contributed.
void NcclCommunicator::do_barrier() {
  const Tensor token = Tensor::zeros({1}, DType::I32, device_);
  collective(
      {.kind = OpKind::Barrier},
      [&](cudaStream_t stream) {
        NCCL_CHECK(ncclAllReduce(token.raw(), token.raw(), 1, ncclInt32, ncclSum, comm_, stream));
      },
      Completion::Waited);
}

// ---------------------------------------------------------------- point to point

void NcclCommunicator::do_send(const Tensor& tensor, int peer, int tag) {
  aborting_on_failure([&] {
    launch(
        cat("rank ", peer, " to receive ", tensor.nbytes(), " bytes (tag ", tag, ")"),
        [&](cudaStream_t stream) {
          NCCL_CHECK(ncclSend(tensor.raw(), count(tensor), nccl_datatype(tensor.dtype()), peer, comm_, stream));
        },
        Completion::QueuedIfAsked);
  });
}

void NcclCommunicator::do_recv(const Tensor& tensor, int peer, int tag) {
  aborting_on_failure([&] {
    launch(
        cat("a message of ", tensor.nbytes(), " bytes from rank ", peer, " (tag ", tag, ")"),
        [&](cudaStream_t stream) {
          NCCL_CHECK(ncclRecv(tensor.raw(), count(tensor), nccl_datatype(tensor.dtype()), peer, comm_, stream));
        },
        Completion::QueuedIfAsked);
  });
}

// ---------------------------------------------------------------- groups

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  std::unique_ptr<Communicator> group;
  aborting_on_failure([&] {
    // ncclCommSplit and MPI_Comm_split block until every rank has called them: every rank arrives first.
    checker().rendezvous({.kind = OpKind::Split});
    // Both order a group's ranks by key, then by rank here, so the two communicators rank alike.
    MPI_Comm mpi_handle = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(mpi_->handle(), color == kNoGroup ? MPI_UNDEFINED : color, key, &mpi_handle));
    std::unique_ptr<MpiCommunicator> mpi;
    if (mpi_handle != MPI_COMM_NULL) {
      mpi = std::make_unique<MpiCommunicator>(mpi_handle);
      mpi->set_verify_calls(mpi_->verify_calls());
    }
    ncclComm_t nccl = nullptr;
    {
      cuda::DeviceGuard on(device_.index);
      NCCL_CHECK(ncclCommSplit(comm_, color == kNoGroup ? NCCL_SPLIT_NOCOLOR : color, key, &nccl, nullptr));
    }
    if (!mpi) return;
    int nccl_rank = -1;
    NCCL_CHECK(ncclCommUserRank(nccl, &nccl_rank));
    if (nccl_rank != mpi->rank()) {
      ncclCommDestroy(nccl);
      fail(ErrorKind::Internal, "ncclCommSplit ranked this rank ", nccl_rank, " but MPI_Comm_split ", mpi->rank());
    }
    group.reset(new NcclCommunicator(std::move(mpi), nccl, device_));
  });
  return group;
}

}  // namespace lab::comm
