// The MPI backend: non-blocking MPI calls polled against the deadline, the call check across ranks, and
// the host staging of CUDA tensors.
#include "common/comm/mpi_communicator.h"

#include <array>
#include <chrono>
#include <climits>

#include "common/comm/mpi_reduce.h"
#include "common/comm/mpi_runtime.h"
#include "common/comm/waiting.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif

namespace lab::comm {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSignatureFields = 5;

// A call's fields as integers, -1 for those the call does not have; describe_field() names them.
std::array<int64_t, kSignatureFields> signature_fields(const MpiCommunicator::CallSignature& call) {
  return {static_cast<int64_t>(call.kind), call.dtype ? static_cast<int64_t>(*call.dtype) : -1,
          call.op ? static_cast<int64_t>(*call.op) : -1, call.elements, call.root};
}

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

int comm_size(MPI_Comm comm) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

// MPI-3 counts are ints.
int mpi_count(int64_t elements) {
  LAB_CHECK(elements <= INT_MAX, Unsupported, "a tensor of ", elements,
            " elements is more than MPI's int count allows; split it");
  return static_cast<int>(elements);
}

std::string error_with_hint(int code) {
  int error_class = code;
  MPI_Error_class(code, &error_class);
  std::string text = mpi_error_string(code);
  if (error_class == MPI_ERR_TRUNCATE)
    text += " (a message was longer than its receive buffer: the ranks passed different sizes)";
  return text;
}

// ---------------------------------------------------------------- the call check

std::string describe_field(int field, int64_t value) {
  switch (field) {
    case 0: return op_kind_name(static_cast<OpKind>(value));
    case 1: return value < 0 ? "no dtype" : cat("dtype ", dtype_name(static_cast<DType>(value)));
    case 2: return value < 0 ? "no reduction" : cat("reduction ", reduce_op_name(static_cast<ReduceOp>(value)));
    case 3: return cat(value, " elements");
    default: return value < 0 ? "no root" : cat("root ", value);
  }
}

}  // namespace

// ---------------------------------------------------------------- lifetime

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : Communicator(comm_rank(comm), comm_size(comm)), comm_(comm) {
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

bool MpiCommunicator::supports(Device device) const {
#ifdef LAB_WITH_CUDA
  if (device.is_cuda()) return true;
#endif
  return device.is_cpu();
}

// ---------------------------------------------------------------- waiting and checking

MPI_Status MpiCommunicator::wait(MPI_Request& request, const std::string& waiting_for) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout();
  while (true) {
    int done = 0;
    MPI_Status status;
    const int code = MPI_Test(&request, &done, &status);
    LAB_CHECK(code == MPI_SUCCESS, Comm, "MPI reported ", error_with_hint(code));
    if (done) return status;
    const Clock::time_point now = Clock::now();
    LAB_CHECK(now < deadline, Comm, "timed out after ", timeout().count(), " ms waiting for ", waiting_for);
    pause_before_next_poll(now - start);
  }
}

void MpiCommunicator::agree(const CallSignature& call) {
  if (!verify_calls_ || size() == 1) return;
  const auto fields = signature_fields(call);
  // One all-reduce with MPI_MAX over the fields and their negations gives every field's max and min.
  std::array<int64_t, 2 * kSignatureFields> extremes;
  for (int i = 0; i < kSignatureFields; ++i) {
    extremes[i] = fields[i];
    extremes[kSignatureFields + i] = -fields[i];
  }
  MPI_Request request;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, extremes.data(), 2 * kSignatureFields, MPI_INT64_T, MPI_MAX, comm_, &request));
  wait(request, every_rank(rank(), size()));
  for (int i = 0; i < kSignatureFields; ++i) {
    const int64_t lowest = -extremes[kSignatureFields + i];
    const int64_t highest = extremes[i];
    LAB_CHECK(lowest == highest, InvalidArgument, "the ranks make different calls here: ", describe_field(i, lowest),
              " on some, ", describe_field(i, highest),
              " on others (every rank must make the same call with the same arguments)");
  }
}

void MpiCommunicator::rendezvous(const CallSignature& call) {
  if (verify_calls_) {
    agree(call);
    return;
  }
  MPI_Request request;
  MPI_CHECK(MPI_Ibarrier(comm_, &request));
  wait(request, every_rank(rank(), size()));
}

// ---------------------------------------------------------------- host staging

#ifdef LAB_WITH_CUDA
namespace {

void* grown(cuda::PinnedBuffer& buffer, size_t bytes) {
  if (buffer.bytes() < bytes) buffer = cuda::PinnedBuffer(bytes);
  return buffer.data();
}

}  // namespace
#endif

void* MpiCommunicator::host_input(const Tensor& tensor) {
#ifdef LAB_WITH_CUDA
  if (tensor.is_cuda()) {
    void* host = grown(staging_[1], tensor.nbytes());
    if (tensor.nbytes() > 0) cuda::copy(host, Device::cpu(), tensor.raw(), tensor.device(), tensor.nbytes());
    return host;
  }
#endif
  return tensor.raw();
}

void* MpiCommunicator::host_output(const Tensor& tensor) {
#ifdef LAB_WITH_CUDA
  if (tensor.is_cuda()) return grown(staging_[0], tensor.nbytes());
#endif
  return tensor.raw();
}

void* MpiCommunicator::host_in_out(const Tensor& tensor) {
#ifdef LAB_WITH_CUDA
  if (tensor.is_cuda()) {
    void* host = host_output(tensor);
    if (tensor.nbytes() > 0) cuda::copy(host, Device::cpu(), tensor.raw(), tensor.device(), tensor.nbytes());
    return host;
  }
#endif
  return tensor.raw();
}

void MpiCommunicator::copy_back([[maybe_unused]] const Tensor& tensor, [[maybe_unused]] const void* host) {
#ifdef LAB_WITH_CUDA
  if (tensor.is_cuda() && tensor.nbytes() > 0)
    cuda::copy(tensor.raw(), tensor.device(), host, Device::cpu(), tensor.nbytes());
#endif
}

// ---------------------------------------------------------------- collectives

void MpiCommunicator::do_all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) {
  agree({.kind = OpKind::AllReduce, .dtype = input.dtype(), .op = op, .elements = input.numel()});
  const bool in_place = same_memory(input, output);
  void* result = in_place ? host_in_out(output) : host_output(output);
  const void* send = in_place ? MPI_IN_PLACE : host_input(input);
  MPI_Request request;
  MPI_CHECK(MPI_Iallreduce(send, result, mpi_count(output.numel()), mpi_datatype(output.dtype()),
                           mpi_reduce_op(output.dtype(), op), comm_, &request));
  wait(request, every_rank(rank(), size()));
  if (op == ReduceOp::Avg) divide_elements(result, output.numel(), output.dtype(), size());
  copy_back(output, result);
}

void MpiCommunicator::do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  agree({.kind = OpKind::ReduceScatter, .dtype = input.dtype(), .op = op, .elements = output.numel()});
  void* result = host_output(output);
  MPI_Request request;
  MPI_CHECK(MPI_Ireduce_scatter_block(host_input(input), result, mpi_count(output.numel()),
                                      mpi_datatype(output.dtype()), mpi_reduce_op(output.dtype(), op), comm_,
                                      &request));
  wait(request, every_rank(rank(), size()));
  if (op == ReduceOp::Avg) divide_elements(result, output.numel(), output.dtype(), size());
  copy_back(output, result);
}

void MpiCommunicator::do_all_gather(const Tensor& input, const Tensor& output) {
  agree({.kind = OpKind::AllGather, .dtype = input.dtype(), .elements = input.numel()});
  const bool in_place = input.numel() > 0 && input.device() == output.device() &&
                        input.raw() == static_cast<char*>(output.raw()) + rank() * input.nbytes();
  // In place, the staged copy of a CUDA output must hold this rank's block: the whole buffer is copied in.
  void* result = in_place ? host_in_out(output) : host_output(output);
  const void* send = in_place ? MPI_IN_PLACE : host_input(input);
  const MPI_Datatype type = mpi_datatype(output.dtype());
  const int block = mpi_count(input.numel());
  MPI_Request request;
  MPI_CHECK(MPI_Iallgather(send, block, type, result, block, type, comm_, &request));
  wait(request, every_rank(rank(), size()));
  copy_back(output, result);
}

void MpiCommunicator::do_broadcast(const Tensor& tensor, int root) {
  agree({.kind = OpKind::Broadcast, .dtype = tensor.dtype(), .elements = tensor.numel(), .root = root});
  const bool is_root = rank() == root;
  void* buffer = is_root ? host_input(tensor) : host_output(tensor);
  MPI_Request request;
  MPI_CHECK(MPI_Ibcast(buffer, mpi_count(tensor.numel()), mpi_datatype(tensor.dtype()), root, comm_, &request));
  wait(request, every_rank(rank(), size()));
  if (!is_root) copy_back(tensor, buffer);
}

void MpiCommunicator::do_barrier() {
  agree({.kind = OpKind::Barrier});
  MPI_Request request;
  MPI_CHECK(MPI_Ibarrier(comm_, &request));
  wait(request, every_rank(rank(), size()));
}

// ---------------------------------------------------------------- point to point

void MpiCommunicator::do_send(const Tensor& tensor, int peer, int tag) {
  MPI_Request request;
  MPI_CHECK(MPI_Isend(host_input(tensor), mpi_count(tensor.numel()), mpi_datatype(tensor.dtype()), peer, tag, comm_,
                      &request));
  // A send MPI has not delivered cannot be withdrawn (MPI_Cancel does not cancel sends in Open MPI): after
  // a timeout it may still complete if the peer posts its receive later.
  wait(request, cat("rank ", peer, " to receive ", tensor.nbytes(), " bytes (tag ", tag, ")"));
}

void MpiCommunicator::do_recv(const Tensor& tensor, int peer, int tag) {
  void* buffer = host_output(tensor);
  const MPI_Datatype type = mpi_datatype(tensor.dtype());
  MPI_Request request;
  MPI_CHECK(MPI_Irecv(buffer, mpi_count(tensor.numel()), type, peer, tag, comm_, &request));
  MPI_Status status;
  try {
    status = wait(request, cat("a message of ", tensor.nbytes(), " bytes from rank ", peer, " (tag ", tag, ")"));
  } catch (const Error&) {
    // Withdraw the receive, so that a message arriving later does not write into the tensor. One that is
    // already being filled cannot be withdrawn: it is let go, to complete on its own.
    MPI_Cancel(&request);
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) MPI_Request_free(&request);
    throw;
  }
  int received = 0;
  MPI_CHECK(MPI_Get_count(&status, type, &received));
  LAB_CHECK(received == tensor.numel(), Comm, "received ", received, " elements from rank ", peer, " (tag ", tag,
            ") into a tensor of ", tensor.numel(), ": the two ranks disagree on the message size");
  copy_back(tensor, buffer);
}

// ---------------------------------------------------------------- groups

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  // MPI_Comm_split has no non-blocking form: every rank arrives first, after which the split cannot hang.
  rendezvous({.kind = OpKind::Split});
  MPI_Comm group = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(comm_, color == kNoGroup ? MPI_UNDEFINED : color, key, &group));
  if (group == MPI_COMM_NULL) return nullptr;
  auto communicator = std::make_unique<MpiCommunicator>(group);
  communicator->verify_calls_ = verify_calls_;
  return communicator;
}

}  // namespace lab::comm
