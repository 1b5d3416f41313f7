// The backend-independent half of every communicator: argument checks, sequence numbers, error context,
// and the broken state after a communication failure.
#include "common/comm/communicator.h"

namespace lab::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return "all_reduce";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllGather: return "all_gather";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Barrier: return "barrier";
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
    case OpKind::Split: return "split";
  }
  return "?";
}

double bus_factor(OpKind kind, int ranks) {
  LAB_CHECK(ranks >= 1, InvalidArgument, "bus_factor of ", ranks, " ranks");
  const double n = ranks;
  switch (kind) {
    case OpKind::AllReduce: return 2 * (n - 1) / n;
    case OpKind::ReduceScatter:
    case OpKind::AllGather: return (n - 1) / n;
    case OpKind::Broadcast:
    case OpKind::Send:
    case OpKind::Recv: return 1;
    case OpKind::Barrier:
    case OpKind::Split: return 0;
  }
  return 0;
}

Communicator::Communicator(int rank, int size) : rank_(rank), size_(size) {
  LAB_CHECK(size >= 1 && 0 <= rank && rank < size, Internal, "communicator rank ", rank, " of size ", size);
}

template <typename Body>
void Communicator::run(OpKind kind, Body&& body) {
  const uint64_t seq = ++sequence_;
  const char* op = op_kind_name(kind);
  const auto where = [&] { return cat("rank ", rank_, "/", size_, " [", backend(), "] ", op, " #", seq); };
  try {
    LAB_CHECK(broken_by_.empty(), Comm, "this communicator is broken since ", broken_by_,
              " failed; the ranks can no longer agree on the order of operations");
    const size_t bytes = body();
    OpTraffic& traffic = traffic_[static_cast<int>(kind)];
    traffic.calls += 1;
    traffic.bytes += bytes;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Comm && broken_by_.empty()) broken_by_ = cat(op, " #", seq);
    throw Error(e.kind(), where() + ": " + e.what());
  }
}

// ---------------------------------------------------------------- checks

bool Communicator::same_memory(const Tensor& a, const Tensor& b) {
  return a.raw() == b.raw() && a.nbytes() == b.nbytes() && a.device() == b.device();
}

namespace {

bool overlap(const Tensor& a, const Tensor& b) {
  if (a.device() != b.device() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* pa = static_cast<const char*>(a.raw());
  const auto* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

void Communicator::check_tensor(const Tensor& t, const char* what) const {
  t.check_defined(what);
  LAB_CHECK(supports(t.device()), Unsupported, "the ", backend(), " backend cannot communicate a tensor on ",
            t.device().str(), " (", what, ")");
}

void Communicator::check_pair(const Tensor& input, const Tensor& output) const {
  check_tensor(input, "input");
  check_tensor(output, "output");
  LAB_CHECK(input.dtype() == output.dtype(), InvalidArgument, "input is ", dtype_name(input.dtype()), " but output is ",
            dtype_name(output.dtype()));
  LAB_CHECK(input.device() == output.device(), InvalidArgument, "input is on ", input.device().str(),
            " but output is on ", output.device().str());
}

void Communicator::check_reducible(DType dtype, ReduceOp op) const {
  const bool floating = dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
  LAB_CHECK(floating || dtype == DType::I32, InvalidArgument, "cannot reduce ", dtype_name(dtype),
            " tensors (reductions take f32, bf16, f16 or i32)");
  LAB_CHECK(floating || op != ReduceOp::Avg, InvalidArgument, "avg of ", dtype_name(dtype),
            " tensors would truncate; use sum and divide");
}

void Communicator::check_peer(int peer, const char* direction) const {
  LAB_CHECK(0 <= peer && peer < size_, InvalidArgument, direction, " rank ", peer, ", which is not in [0, ", size_,
            ")");
  LAB_CHECK(peer != rank_, InvalidArgument, direction, " rank ", peer,
            ", which is this rank: a blocking send to oneself waits for a receive that can only be posted after "
            "it returns (a deadlock)",
            size_ == 1 ? "; a single-process communicator has no other rank to exchange with" : "");
}

// ---------------------------------------------------------------- collectives

void Communicator::all_reduce(const Tensor& tensor, ReduceOp op) {
  all_reduce(tensor, tensor, op);
}

void Communicator::all_reduce(const Tensor& input, const Tensor& output, ReduceOp op) {
  run(OpKind::AllReduce, [&] {
    check_pair(input, output);
    check_reducible(input.dtype(), op);
    LAB_CHECK(input.numel() == output.numel(), InvalidArgument, "input has ", input.numel(),
              " elements but output has ", output.numel());
    LAB_CHECK(same_memory(input, output) || !overlap(input, output), InvalidArgument,
              "input and output overlap without being the same tensor");
    do_all_reduce(input, output, op);
    return output.nbytes();
  });
}

void Communicator::reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  run(OpKind::ReduceScatter, [&] {
    check_pair(input, output);
    check_reducible(input.dtype(), op);
    LAB_CHECK(input.numel() == size_ * output.numel(), InvalidArgument, "input has ", input.numel(),
              " elements; it must be size (", size_, ") x output (", output.numel(), " elements)");
    LAB_CHECK(!overlap(input, output), InvalidArgument, "input and output overlap");
    do_reduce_scatter(input, output, op);
    return input.nbytes();
  });
}

void Communicator::all_gather(const Tensor& input, const Tensor& output) {
  run(OpKind::AllGather, [&] {
    check_pair(input, output);
    LAB_CHECK(output.numel() == size_ * input.numel(), InvalidArgument, "output has ", output.numel(),
              " elements; it must be size (", size_, ") x input (", input.numel(), " elements)");
    const bool in_place = input.numel() > 0 && same_memory(input, output.view(rank_ * input.numel(), {input.numel()}));
    LAB_CHECK(in_place || !overlap(input, output), InvalidArgument, "input overlaps output without being block ", rank_,
              " of it");
    do_all_gather(input, output);
    return output.nbytes();
  });
}

void Communicator::all_gather(const Tensor& buffer) {
  run(OpKind::AllGather, [&] {
    check_tensor(buffer, "buffer");
    LAB_CHECK(buffer.numel() % size_ == 0, InvalidArgument, "buffer of ", buffer.numel(),
              " elements does not split into ", size_, " equal blocks");
    const int64_t block = buffer.numel() / size_;
    do_all_gather(buffer.view(rank_ * block, {block}), buffer);
    return buffer.nbytes();
  });
}

void Communicator::broadcast(const Tensor& tensor, int root) {
  run(OpKind::Broadcast, [&] {
    check_tensor(tensor, "tensor");
    LAB_CHECK(0 <= root && root < size_, InvalidArgument, "root ", root, " is not a rank in [0, ", size_, ")");
    do_broadcast(tensor, root);
    return tensor.nbytes();
  });
}

void Communicator::barrier() {
  run(OpKind::Barrier, [&] {
    do_barrier();
    return size_t{0};
  });
}

// ---------------------------------------------------------------- point to point

void Communicator::send(const Tensor& tensor, int peer, int tag) {
  run(OpKind::Send, [&] {
    check_tensor(tensor, "tensor");
    check_peer(peer, "send to");
    LAB_CHECK(tag >= 0, InvalidArgument, "tag ", tag, " is negative");
    do_send(tensor, peer, tag);
    return tensor.nbytes();
  });
}

void Communicator::recv(const Tensor& tensor, int peer, int tag) {
  run(OpKind::Recv, [&] {
    check_tensor(tensor, "tensor");
    check_peer(peer, "receive from");
    LAB_CHECK(tag >= 0, InvalidArgument, "tag ", tag, " is negative");
    do_recv(tensor, peer, tag);
    return tensor.nbytes();
  });
}

// ---------------------------------------------------------------- groups and settings

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  std::unique_ptr<Communicator> group;
  run(OpKind::Split, [&] {
    LAB_CHECK(color >= 0 || color == kNoGroup, InvalidArgument, "color ", color,
              " is negative (use kNoGroup to join no group)");
    group = do_split(color, key);
    if (group) group->set_timeout(timeout_);
    return size_t{0};
  });
  return group;
}

void Communicator::set_queued(bool queued) {
  LAB_CHECK(!queued || can_queue(), InvalidArgument, "the ", backend(),
            " backend completes every operation before it returns: it cannot queue them on a device stream");
  queued_ = queued;
}

std::string Communicator::capture_blocker(std::string_view what) const {
  if (size_ == 1 || can_queue()) return "";
  return cat(what, " over the ", backend(), " backend complete on the host (NCCL queues them on the stream)");
}

void Communicator::wait_queued() {
  if (!queued_) return;
  try {
    LAB_CHECK(broken_by_.empty(), Comm, "this communicator is broken since ", broken_by_, " failed");
    do_wait_queued();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Comm && broken_by_.empty()) broken_by_ = cat("the wait for the queued operations");
    throw Error(e.kind(), cat("rank ", rank_, "/", size_, " [", backend(), "] waiting for the queued operations (#",
                              sequence_, " last): ", e.what()));
  }
}

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  LAB_CHECK(timeout.count() > 0, InvalidArgument, "communicator timeout must be positive, got ", timeout.count(),
            " ms");
  timeout_ = timeout;
}

}  // namespace lab::comm
