// The stand-in's operations (operations.h): reductions in a wide type, and byte moves.
#include "common/cuda/emulation/nccl/operations.h"

#include <cstdint>
#include <cstring>

namespace lab::cuda::emu::nccl {

namespace {

// NCCL's point-to-point calls have no tag; one MPI tag serves them all, so messages between two ranks
// match in the order they were sent, as in NCCL.
constexpr int kMessageTag = 0;

// ---------------------------------------------------------------- reductions

// The type a reduction accumulates in: float for the floating types, int32 for int32. Both are 4 bytes.
bool accumulates_in_float(ncclDataType_t type) {
  return type != ncclInt32;
}

MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_SUM;  // ncclSum, and ncclAvg before its division
  }
}

// Element i of `data` (of `type`) as float.
float widened(const void* data, size_t i, ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return __half2float(static_cast<const __half*>(data)[i]);
    case ncclBfloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

void store_narrowed(void* data, size_t i, ncclDataType_t type, float value) {
  switch (type) {
    case ncclFloat16: static_cast<__half*>(data)[i] = __float2half(value); return;
    case ncclBfloat16: static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16(value); return;
    default: static_cast<float*>(data)[i] = value; return;
  }
}

// All-reduce (`count` elements reduced) and reduce-scatter (size * `count` elements reduced, of which this
// rank keeps its block: MPI_IN_PLACE leaves it at the start of the accumulator).
class Reduction final : public Operation {
 public:
  Reduction(const char* name, bool scatter, const void* send, void* recv, size_t count, ncclDataType_t type,
            ncclRedOp_t op)
      : Operation(name), scatter_(scatter), send_(send), recv_(recv), count_(count), type_(type), op_(op) {}

  int start(MPI_Comm comm, int, int size) override {
    const size_t in = scatter_ ? count_ * static_cast<size_t>(size) : count_;
    buffer_.resize(in * 4);
    if (accumulates_in_float(type_)) {
      auto* acc = reinterpret_cast<float*>(buffer_.data());
      for (size_t i = 0; i < in; ++i) acc[i] = widened(send_, i, type_);
    } else {
      std::memcpy(buffer_.data(), send_, in * 4);
    }
    const MPI_Datatype acc_type = accumulates_in_float(type_) ? MPI_FLOAT : MPI_INT32_T;
    requests_.assign(1, MPI_REQUEST_NULL);
    if (scatter_)
      return MPI_Ireduce_scatter_block(MPI_IN_PLACE, buffer_.data(), static_cast<int>(count_), acc_type, mpi_op(op_),
                                       comm, &requests_[0]);
    return MPI_Iallreduce(MPI_IN_PLACE, buffer_.data(), static_cast<int>(count_), acc_type, mpi_op(op_), comm,
                          &requests_[0]);
  }

  std::string finish(int size) override {
    if (accumulates_in_float(type_)) {
      const auto* acc = reinterpret_cast<const float*>(buffer_.data());
      for (size_t i = 0; i < count_; ++i)
        store_narrowed(recv_, i, type_, op_ == ncclAvg ? acc[i] / static_cast<float>(size) : acc[i]);
    } else {
      const auto* acc = reinterpret_cast<const int32_t*>(buffer_.data());
      auto* result = static_cast<int32_t*>(recv_);
      for (size_t i = 0; i < count_; ++i) result[i] = op_ == ncclAvg ? acc[i] / size : acc[i];
    }
    return {};
  }

 private:
  bool scatter_;
  const void* send_;
  void* recv_;
  size_t count_;
  ncclDataType_t type_;
  ncclRedOp_t op_;
};

// ---------------------------------------------------------------- byte moves

class Gather final : public Operation {
 public:
  Gather(const void* send, void* recv, size_t bytes)
      : Operation("ncclAllGather"), send_(send), recv_(recv), bytes_(bytes) {}

  int start(MPI_Comm comm, int rank, int size) override {
    buffer_.resize(bytes_ * static_cast<size_t>(size));
    std::memcpy(buffer_.data() + bytes_ * static_cast<size_t>(rank), send_, bytes_);
    requests_.assign(1, MPI_REQUEST_NULL);
    return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer_.data(), static_cast<int>(bytes_), MPI_BYTE, comm,
                          &requests_[0]);
  }

  std::string finish(int) override {
    std::memcpy(recv_, buffer_.data(), buffer_.size());
    return {};
  }

 private:
  const void* send_;
  void* recv_;
  size_t bytes_;
};

class Broadcast final : public Operation {
 public:
  Broadcast(const void* send, void* recv, size_t bytes, int root)
      : Operation("ncclBroadcast"), send_(send), recv_(recv), bytes_(bytes), root_(root) {}

  int start(MPI_Comm comm, int rank, int) override {
    buffer_.resize(bytes_);
    if (rank == root_) std::memcpy(buffer_.data(), send_, bytes_);
    requests_.assign(1, MPI_REQUEST_NULL);
    return MPI_Ibcast(buffer_.data(), static_cast<int>(bytes_), MPI_BYTE, root_, comm, &requests_[0]);
  }

  std::string finish(int) override {
    std::memcpy(recv_, buffer_.data(), bytes_);
    return {};
  }

 private:
  const void* send_;
  void* recv_;
  size_t bytes_;
  int root_;
};

class Send final : public Operation {
 public:
  Send(const void* send, size_t bytes, int peer) : Operation("ncclSend"), send_(send), bytes_(bytes), peer_(peer) {}

  int start(MPI_Comm comm, int, int) override {
    buffer_.assign(static_cast<const std::byte*>(send_), static_cast<const std::byte*>(send_) + bytes_);
    requests_.assign(1, MPI_REQUEST_NULL);
    return MPI_Isend(buffer_.data(), static_cast<int>(bytes_), MPI_BYTE, peer_, kMessageTag, comm, &requests_[0]);
  }

  std::string finish(int) override { return {}; }

 private:
  const void* send_;
  size_t bytes_;
  int peer_;
};

class Receive final : public Operation {
 public:
  Receive(void* recv, size_t bytes, int peer) : Operation("ncclRecv"), recv_(recv), bytes_(bytes), peer_(peer) {}

  int start(MPI_Comm comm, int, int) override {
    buffer_.resize(bytes_);
    requests_.assign(1, MPI_REQUEST_NULL);
    return MPI_Irecv(buffer_.data(), static_cast<int>(bytes_), MPI_BYTE, peer_, kMessageTag, comm, &requests_[0]);
  }

  // NCCL does not check that a send and its receive have the same size (a shorter send leaves the receive
  // waiting on a GPU); MPI tells, so the stand-in reports it.
  std::string finish(int) override {
    int received = 0;
    MPI_Get_count(&status_, MPI_BYTE, &received);
    if (static_cast<size_t>(received) != bytes_)
      return "ncclRecv: received " + std::to_string(received) + " bytes from rank " + std::to_string(peer_) +
             " into a buffer of " + std::to_string(bytes_) + " (the ranks passed different counts)";
    std::memcpy(recv_, buffer_.data(), bytes_);
    return {};
  }

 private:
  void* recv_;
  size_t bytes_;
  int peer_;
};

}  // namespace

size_t element_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;  // ncclInt64, ncclUint64, ncclFloat64
  }
}

bool reducible(ncclDataType_t type) {
  return type == ncclInt32 || type == ncclFloat32 || type == ncclFloat16 || type == ncclBfloat16;
}

std::shared_ptr<Operation> all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  return std::make_shared<Reduction>("ncclAllReduce", false, send, recv, count, type, op);
}

std::shared_ptr<Operation> reduce_scatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                                          ncclRedOp_t op) {
  return std::make_shared<Reduction>("ncclReduceScatter", true, send, recv, count, type, op);
}

std::shared_ptr<Operation> all_gather(const void* send, void* recv, size_t bytes) {
  return std::make_shared<Gather>(send, recv, bytes);
}

std::shared_ptr<Operation> broadcast(const void* send, void* recv, size_t bytes, int root) {
  return std::make_shared<Broadcast>(send, recv, bytes, root);
}

std::shared_ptr<Operation> send(const void* send, size_t bytes, int peer) {
  return std::make_shared<Send>(send, bytes, peer);
}

std::shared_ptr<Operation> receive(void* recv, size_t bytes, int peer) {
  return std::make_shared<Receive>(recv, bytes, peer);
}

}  // namespace lab::cuda::emu::nccl
