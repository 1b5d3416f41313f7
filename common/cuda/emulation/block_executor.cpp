#include "common/cuda/emulation/block_executor.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <utility>
#include <vector>

#include "common/cuda/emulation/fiber.h"
#include "common/cuda/emulation/memory.h"
#include "common/cuda/emulation/settings.h"
#include "device_functions.h"

// The built-in variables of the CUDA thread running on this OS thread (declared in device_functions.h).
constinit thread_local uint3 threadIdx{};
constinit thread_local uint3 blockIdx{};
constinit thread_local dim3 blockDim;
constinit thread_local dim3 gridDim;

namespace lab::cuda::emu {

namespace {

using device::WarpOp;

constexpr unsigned kWarpSize = 32;

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

std::string hex(unsigned value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string coordinates(uint3 v) {
  return cat("(", v.x, ",", v.y, ",", v.z, ")");
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::Shfl: return "__shfl_sync";
    case WarpOp::ShflUp: return "__shfl_up_sync";
    case WarpOp::ShflDown: return "__shfl_down_sync";
    case WarpOp::ShflXor: return "__shfl_xor_sync";
    case WarpOp::Ballot: return "__ballot_sync";
    case WarpOp::Any: return "__any_sync";
    case WarpOp::All: return "__all_sync";
    case WarpOp::WmmaLoad: return "nvcuda::wmma::load_matrix_sync";
    case WarpOp::WmmaStore: return "nvcuda::wmma::store_matrix_sync";
    case WarpOp::WmmaMma: return "nvcuda::wmma::mma_sync";
    case WarpOp::MmaSync: return "mma.sync.m16n8k16";
    case WarpOp::Ldmatrix: return "ldmatrix.sync";
    case WarpOp::Wgmma: return "wgmma.wait_group";
  }
  return "a warp collective";
}

bool is_task(WarpOp op) {
  return op >= WarpOp::WmmaLoad;
}

bool is_shuffle(WarpOp op) {
  return op == WarpOp::Shfl || op == WarpOp::ShflUp || op == WarpOp::ShflDown || op == WarpOp::ShflXor;
}

// A small, fast generator for the shuffled schedule (splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }

 private:
  uint64_t state_;
};

enum class State { NotStarted, Running, Ready, AtBarrier, InCollective, Exited };

struct Runner;

struct CudaThread {
  uint3 index{};
  unsigned lane = 0;
  unsigned warp = 0;
  State state = State::NotStarted;
  Runner* runner = nullptr;
  // This lane's slot of its current warp collective: what it brought, and what it receives.
  WarpOp op = WarpOp::Sync;
  unsigned mask = 0;
  uint64_t value = 0;
  int arg = 0;
  int width = 0;
  uint64_t result = 0;
  device::WarpTask task = nullptr;  // a warp task's work (value is then the lane's data)
};

class BlockExecutor;

// An asynchronous copy into shared memory (__pipeline_memcpy_async, cp.async), queued until a wait covers its
// batch: the latest moment a GPU may complete it, so code that reads the destination before waiting reads what
// was there before, as it may on a GPU.
struct AsyncCopy {
  std::byte* dst;
  const std::byte* src;
  uint32_t bytes;  // 4, 8 or 16
  uint32_t zfill;  // the last zfill bytes of dst are zeros instead of source bytes
  uint64_t batch;  // the number of __pipeline_commit calls before it
};
struct ThreadCopies {
  std::vector<AsyncCopy> pending;
  uint64_t committed = 0;
};

// A fiber with its stack; it runs CUDA threads of the block one after another until one of them blocks.
struct Runner {
  BlockExecutor* executor = nullptr;
  std::unique_ptr<FiberStack> stack;
  Fiber fiber;
  bool in_use = false;
  bool abandoned = false;  // its last CUDA thread never finished (the block faulted)
};

// The lanes of one warp that wait in a collective with one mask.
struct PendingCollective {
  unsigned mask;
  unsigned arrived;
  WarpOp op;
};

struct WarpState {
  unsigned lanes = 0;   // the lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;  // lanes whose thread has finished
  std::vector<PendingCollective> pending;
};

// The executor of one OS thread: it runs one block at a time and keeps its fibers, stacks and buffers
// from block to block.
class BlockExecutor {
 public:
  std::optional<std::string> run(const GridLaunch& launch, uint3 block);

  // The device side, called from inside a fiber.
  void sync_threads();
  uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
  void warp_task(WarpOp op, unsigned mask, void* lane_data, device::WarpTask task);
  unsigned active_mask() const;
  void* dynamic_shared() const { return shared_.get(); }
  size_t dynamic_shared_bytes() const { return launch_->dynamic_shared_bytes; }
  void async_copy(void* dst, const void* src, size_t bytes, size_t zfill);
  void async_commit();
  void async_wait_prior(size_t prior);
  static void land(const AsyncCopy& copy);

  // For a debugger: every CUDA thread of the running block and what it is doing, on stderr.
  void print_state() const;

 private:
  struct FreeAligned {
    void operator()(std::byte* p) const { std::free(p); }
  };

  void set_up(const GridLaunch& launch, uint3 block);
  void tear_down();
  CudaThread* take_unstarted();
  CudaThread* take_ready();
  void choose_interval_order();
  unsigned rank_of(const CudaThread& thread) const { return warp_rank_[thread.warp]; }
  Runner* acquire_runner();
  Fiber& next_fiber();
  void enter(CudaThread& thread);
  void run_thread(CudaThread& thread);
  void on_exit(CudaThread& thread);
  void make_ready(CudaThread& thread);
  void suspend(CudaThread& thread);
  void yield(CudaThread& thread);
  void complete(const PendingCollective& group);
  int source_lane(const CudaThread& lane) const;
  void diagnose_deadlock();
  CudaThread& current() const;
  CudaThread& lane_of(const CudaThread& in_warp, unsigned lane) { return threads_[in_warp.warp * kWarpSize + lane]; }
  std::string call(const CudaThread& thread) const;
  std::string where(const CudaThread& thread) const;
  void set_fault(const CudaThread& named, const std::string& what);
  [[noreturn]] void fault_at(const CudaThread& named, const std::string& what);

  static void runner_main(void* runner);

  const GridLaunch* launch_ = nullptr;
  uint3 block_{};
  std::vector<CudaThread> threads_;
  std::vector<WarpState> warps_;
  std::vector<unsigned> start_order_;  // linear thread indices, in the order threads start
  size_t next_unstarted_ = 0;
  std::deque<CudaThread*> ready_;
  std::vector<CudaThread*> barrier_waiters_;
  size_t exited_ = 0;
  CudaThread* current_ = nullptr;
  Fiber scheduler_;  // the OS thread's own stack, where run() waits while the block's fibers run
  std::optional<std::string> fault_;
  bool shuffled_ = false;
  // Shuffled, an interval between two barriers runs in one of two orders, chosen at random at its start: the
  // threads interleaved at random (at every barrier and warp collective), or warp by warp, each warp running as
  // far as it can (to the barrier) before the next one in a random order of the warps (warp_rank_) resumes.
  bool warp_serial_ = false;
  std::vector<unsigned> warp_rank_;
  Rng rng_;
  std::vector<std::unique_ptr<Runner>> runners_;
  std::vector<Runner*> idle_runners_;
  std::unique_ptr<std::byte, FreeAligned> shared_;
  size_t shared_capacity_ = 0;
  // Each CUDA thread's asynchronous copies not waited for yet, by linear thread index (the vectors keep their
  // capacity from block to block), and the device allocation the last copy read from.
  std::vector<ThreadCopies> async_;
  std::optional<Allocation> last_source_;
};

thread_local BlockExecutor* t_running = nullptr;  // the executor running a block on this OS thread

BlockExecutor& running_executor(const char* function) {
  if (t_running == nullptr) {
    std::fprintf(stderr, "lab cuda emulation: %s called outside a kernel\n", function);
    std::abort();
  }
  return *t_running;
}

// ---------------------------------------------------------------- the scheduler

std::optional<std::string> BlockExecutor::run(const GridLaunch& launch, uint3 block) {
  set_up(launch, block);
  t_running = this;
  // The fibers switch to one another while they find work (suspend()); the scheduler is switched back to only
  // when none is left: the block has finished, faulted or cannot go on.
  while (!fault_) {
    Fiber& next = next_fiber();
    if (&next != &scheduler_) {
      Fiber::switch_to(scheduler_, next);
    } else if (exited_ == threads_.size()) {
      break;
    } else {
      diagnose_deadlock();
    }
  }
  t_running = nullptr;
  tear_down();
  return std::move(fault_);
}

void BlockExecutor::set_up(const GridLaunch& launch, uint3 block) {
  launch_ = &launch;
  block_ = block;
  const dim3 b = launch.block;
  const size_t n = static_cast<size_t>(b.x) * b.y * b.z;
  threads_.assign(n, CudaThread{});
  for (size_t i = 0; i < n; ++i) {
    CudaThread& t = threads_[i];
    t.index = uint3{static_cast<unsigned>(i % b.x), static_cast<unsigned>(i / b.x % b.y),
                    static_cast<unsigned>(i / (static_cast<size_t>(b.x) * b.y))};
    t.lane = static_cast<unsigned>(i % kWarpSize);
    t.warp = static_cast<unsigned>(i / kWarpSize);
  }
  warps_.resize((n + kWarpSize - 1) / kWarpSize);
  for (size_t w = 0; w < warps_.size(); ++w) {
    const size_t lanes = std::min<size_t>(kWarpSize, n - w * kWarpSize);
    warps_[w].lanes = lanes == kWarpSize ? ~0u : (1u << lanes) - 1u;
    warps_[w].exited = 0;
    warps_[w].pending.clear();
  }
  if (async_.size() < n) async_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    async_[i].pending.clear();
    async_[i].committed = 0;
  }
  last_source_.reset();
  start_order_.resize(n);
  std::iota(start_order_.begin(), start_order_.end(), 0u);
  shuffled_ = launch.seed.has_value();
  if (shuffled_) {
    const uint64_t linear_block =
        block.x + static_cast<uint64_t>(launch.grid.x) * (block.y + static_cast<uint64_t>(launch.grid.y) * block.z);
    rng_ = Rng(*launch.seed ^ (launch.launch_index * 0x9e3779b97f4a7c15ull) ^ (linear_block << 20));
    for (size_t i = n; i > 1; --i) std::swap(start_order_[i - 1], start_order_[rng_.below(i)]);
  }
  choose_interval_order();
  if (warp_serial_)  // the first interval starts its threads warp by warp too (shuffled within each warp)
    std::stable_sort(start_order_.begin(), start_order_.end(),
                     [this](unsigned a, unsigned b) { return rank_of(threads_[a]) < rank_of(threads_[b]); });
  next_unstarted_ = 0;
  ready_.clear();
  barrier_waiters_.clear();
  exited_ = 0;
  fault_.reset();
  if (launch.dynamic_shared_bytes > shared_capacity_) {
    // Aligned like the largest vector type; aligned_alloc wants a multiple of the alignment.
    constexpr size_t kAlign = 256;
    shared_capacity_ = (launch.dynamic_shared_bytes + kAlign - 1) / kAlign * kAlign;
    shared_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, shared_capacity_)));
  }
  blockIdx = block;
  blockDim = launch.block;
  gridDim = launch.grid;
}

// After a fault the block stops where it stands: fibers still inside a CUDA thread are abandoned (their
// stacks are reused, never resumed).
void BlockExecutor::tear_down() {
  for (const auto& runner : runners_) {
    if (!runner->in_use) continue;
    runner->in_use = false;
    runner->abandoned = true;
    idle_runners_.push_back(runner.get());
  }
  current_ = nullptr;
}

CudaThread* BlockExecutor::take_unstarted() {
  if (next_unstarted_ == start_order_.size()) return nullptr;
  return &threads_[start_order_[next_unstarted_++]];
}

CudaThread* BlockExecutor::take_ready() {
  if (warp_serial_) {  // a ready lane of the first warp in this interval's order, at random among its lanes
    unsigned best = std::numeric_limits<unsigned>::max();
    size_t candidates = 0, pick = 0;
    for (size_t i = 0; i < ready_.size(); ++i) {
      const unsigned rank = rank_of(*ready_[i]);
      if (rank < best) best = rank, candidates = 0;
      if (rank == best && rng_.below(++candidates) == 0) pick = i;
    }
    std::swap(ready_[pick], ready_.front());
  } else if (shuffled_) {
    std::swap(ready_[rng_.below(ready_.size())], ready_.front());
  }
  CudaThread* thread = ready_.front();
  ready_.pop_front();
  return thread;
}

void BlockExecutor::choose_interval_order() {
  warp_serial_ = shuffled_ && rng_.below(2) == 0;
  if (!warp_serial_) return;
  warp_rank_.resize(warps_.size());
  std::iota(warp_rank_.begin(), warp_rank_.end(), 0u);
  for (size_t i = warp_rank_.size(); i > 1; --i) std::swap(warp_rank_[i - 1], warp_rank_[rng_.below(i)]);
}

Runner* BlockExecutor::acquire_runner() {
  if (idle_runners_.empty()) {
    auto runner = std::make_unique<Runner>();
    runner->executor = this;
    runner->stack = std::make_unique<FiberStack>(settings().fiber_stack_bytes);
    idle_runners_.push_back(runner.get());
    runners_.push_back(std::move(runner));
  }
  Runner* runner = idle_runners_.back();
  idle_runners_.pop_back();
  runner->in_use = true;
  return runner;
}

// The fiber to run next, ready to be switched to: a released thread's, where it waits (first, or shuffled at
// random), or a new runner's, which starts the threads not started yet; the scheduler's when there is neither.
Fiber& BlockExecutor::next_fiber() {
  if (fault_) return scheduler_;
  const bool can_start = next_unstarted_ < threads_.size();
  // Warp by warp: resume a ready lane unless the next thread to start belongs to an earlier warp in the order.
  const auto ready_first = [&] {
    if (!can_start) return true;
    if (!warp_serial_) return !shuffled_ || rng_.below(2) != 0;
    const unsigned next_start = rank_of(threads_[start_order_[next_unstarted_]]);
    return std::any_of(ready_.begin(), ready_.end(), [&](const CudaThread* t) { return rank_of(*t) <= next_start; });
  };
  if (!ready_.empty() && ready_first()) {
    CudaThread& thread = *take_ready();
    thread.state = State::Running;
    enter(thread);
    return thread.runner->fiber;
  }
  if (!can_start) return scheduler_;
  Runner& runner = *acquire_runner();
  runner.fiber.start(*runner.stack, &BlockExecutor::runner_main, &runner, runner.abandoned, scheduler_);
  runner.abandoned = false;
  return runner.fiber;
}

void BlockExecutor::enter(CudaThread& thread) {
  current_ = &thread;
  threadIdx = thread.index;
}

void BlockExecutor::runner_main(void* arg) {
  Runner& runner = *static_cast<Runner*>(arg);
  BlockExecutor& self = *runner.executor;
  while (CudaThread* thread = self.take_unstarted()) {
    thread->runner = &runner;
    thread->state = State::Running;
    self.enter(*thread);
    self.run_thread(*thread);
  }
  // Free for the next runner once this fiber has made its last switch, to the scheduler (nothing runs between).
  runner.in_use = false;
  self.idle_runners_.push_back(&runner);
}

void BlockExecutor::run_thread(CudaThread& thread) {
  // The exception is only copied inside the handler: a fiber must not switch away while the OS thread's
  // exception-handling state holds a caught exception.
  std::optional<std::string> thrown;
  try {
    launch_->run_thread(launch_->bound);
  } catch (const std::exception& e) {
    thrown = e.what();
  } catch (...) {
    thrown = "an exception of unknown type";
  }
  if (thrown) fault_at(thread, cat("threw a C++ exception: ", *thrown));
  on_exit(thread);
}

void BlockExecutor::on_exit(CudaThread& thread) {
  thread.state = State::Exited;
  ++exited_;
  WarpState& warp = warps_[thread.warp];
  warp.exited |= 1u << thread.lane;
  if (!barrier_waiters_.empty()) {
    fault_at(thread, cat("exited while ", barrier_waiters_.size(), " thread(s) of the block wait at __syncthreads (",
                         "thread ", coordinates(barrier_waiters_.front()->index),
                         " among them): every thread of the block must reach each __syncthreads"));
  }
  for (const PendingCollective& group : warp.pending) {
    if ((group.mask >> thread.lane) & 1u)
      fault_at(thread, cat("exited while lanes ", hex(group.arrived), " wait for it in ", op_name(group.op), "(mask ",
                           hex(group.mask), ")"));
  }
}

void BlockExecutor::make_ready(CudaThread& thread) {
  thread.state = State::Ready;
  ready_.push_back(&thread);
}

// The thread waits: the OS thread goes straight on to the next work, one switch (through the scheduler, two).
void BlockExecutor::suspend(CudaThread& thread) {
  Fiber& me = thread.runner->fiber;
  Fiber& next = next_fiber();
  if (&next != &me) Fiber::switch_to(me, next);  // itself when a yielding thread is picked again (shuffled)
}

void BlockExecutor::yield(CudaThread& thread) {
  make_ready(thread);
  suspend(thread);
}

CudaThread& BlockExecutor::current() const {
  return *current_;
}

// ---------------------------------------------------------------- barrier

void BlockExecutor::sync_threads() {
  CudaThread& thread = current();
  if (exited_ > 0) {
    const auto gone =
        std::find_if(threads_.begin(), threads_.end(), [](const CudaThread& t) { return t.state == State::Exited; });
    fault_at(thread, cat("reached __syncthreads, but thread ", coordinates(gone->index),
                         " has already exited: every thread of the block must reach each __syncthreads (an early ",
                         "return before a barrier?)"));
  }
  thread.state = State::AtBarrier;
  barrier_waiters_.push_back(&thread);
  if (barrier_waiters_.size() < threads_.size()) {
    suspend(thread);
    return;
  }
  // The last to arrive releases the others and carries on (or, shuffled, takes its turn like them, in the next
  // interval's order).
  for (CudaThread* waiter : barrier_waiters_)
    if (waiter != &thread) make_ready(*waiter);
  barrier_waiters_.clear();
  thread.state = State::Running;
  if (shuffled_) {
    choose_interval_order();
    yield(thread);
  }
}

// ---------------------------------------------------------------- warp collectives

uint64_t BlockExecutor::warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  CudaThread& thread = current();
  WarpState& warp = warps_[thread.warp];
  const unsigned bit = 1u << thread.lane;
  thread.op = op;
  thread.mask = mask;
  if ((mask & bit) == 0)
    fault_at(thread, cat(call(thread), " omits the calling lane ", thread.lane,
                         ": a lane may only call a collective whose mask includes it"));
  if (const unsigned absent = mask & ~warp.lanes; absent != 0)
    fault_at(thread,
             cat(call(thread), " includes lane ", std::countr_zero(absent), ", which does not exist: the block has ",
                 threads_.size(), " threads, so warp ", thread.warp, " has ", std::popcount(warp.lanes), " lanes"));
  if (const unsigned gone = mask & warp.exited; gone != 0)
    fault_at(thread, cat(call(thread), " includes lane ", std::countr_zero(gone), " (thread ",
                         coordinates(lane_of(thread, static_cast<unsigned>(std::countr_zero(gone))).index),
                         "), which has exited"));
  if (is_shuffle(op) && (width < 1 || width > static_cast<int>(kWarpSize) || !std::has_single_bit(unsigned(width))))
    fault_at(thread, cat(call(thread), ": width ", width, " is not a power of two in [1, 32]"));
  thread.value = value;
  thread.arg = arg;
  thread.width = width;
  thread.state = State::InCollective;

  auto group = std::find_if(warp.pending.begin(), warp.pending.end(),
                            [mask](const PendingCollective& g) { return g.mask == mask; });
  if (group == warp.pending.end()) {
    warp.pending.push_back(PendingCollective{mask, 0, op});
    group = warp.pending.end() - 1;
  } else if (group->op != op) {
    fault_at(thread, cat(call(thread), " meets lanes ", hex(group->arrived), " of the same mask waiting in ",
                         op_name(group->op), ": every lane of a mask must call the same collective"));
  }
  group->arrived |= bit;
  if (group->arrived != mask) {
    suspend(thread);
    return thread.result;
  }
  const PendingCollective done = *group;
  warp.pending.erase(group);
  complete(done);
  thread.state = State::Running;
  if (shuffled_) yield(thread);
  return thread.result;
}

// A collective like the others, but the last lane to arrive runs the task over every lane's data (complete()).
void BlockExecutor::warp_task(WarpOp op, unsigned mask, void* lane_data, device::WarpTask task) {
  current().task = task;
  warp_collective(op, mask, reinterpret_cast<uintptr_t>(lane_data), 0, static_cast<int>(kWarpSize));
}

// The lane `lane` reads in its shuffle, as PTX's shfl.sync defines it, or -1 when the source falls outside
// the lane's segment of `width` lanes (the lane then keeps its own value).
int BlockExecutor::source_lane(const CudaThread& lane) const {
  const int64_t self = lane.lane;
  const int64_t width = lane.width;
  const int64_t first = self & ~(width - 1);
  const int64_t last = first + width - 1;
  switch (lane.op) {
    case WarpOp::Shfl: return static_cast<int>(first + (lane.arg & (width - 1)));
    case WarpOp::ShflUp: {
      const int64_t source = self - static_cast<int64_t>(static_cast<unsigned>(lane.arg));
      return source >= first ? static_cast<int>(source) : -1;
    }
    case WarpOp::ShflDown: {
      const int64_t source = self + static_cast<int64_t>(static_cast<unsigned>(lane.arg));
      return source <= last ? static_cast<int>(source) : -1;
    }
    case WarpOp::ShflXor: {
      const int64_t source = self ^ static_cast<int64_t>(static_cast<unsigned>(lane.arg));
      return source <= last ? static_cast<int>(source) : -1;
    }
    default: return -1;
  }
}

// Every lane of the group has arrived: compute each lane's result and release the others.
void BlockExecutor::complete(const PendingCollective& group) {
  const CudaThread& me = current();
  if (is_task(group.op)) {
    void* lanes[kWarpSize] = {};
    for (unsigned l = group.mask; l != 0; l &= l - 1) {
      const unsigned lane = static_cast<unsigned>(std::countr_zero(l));
      lanes[lane] = reinterpret_cast<void*>(lane_of(me, lane).value);
    }
    me.task(lanes, group.mask);
    for (unsigned l = group.mask; l != 0; l &= l - 1) {
      CudaThread& lane = lane_of(me, static_cast<unsigned>(std::countr_zero(l)));
      if (&lane != &me) make_ready(lane);
    }
    return;
  }
  unsigned ballot = 0;
  for (unsigned lanes = group.mask; lanes != 0; lanes &= lanes - 1) {
    const unsigned lane = static_cast<unsigned>(std::countr_zero(lanes));
    if (lane_of(me, lane).value != 0) ballot |= 1u << lane;
  }
  for (unsigned lanes = group.mask; lanes != 0; lanes &= lanes - 1) {
    CudaThread& lane = lane_of(me, static_cast<unsigned>(std::countr_zero(lanes)));
    switch (group.op) {
      case WarpOp::Sync: lane.result = 0; break;
      case WarpOp::Ballot: lane.result = ballot; break;
      case WarpOp::Any: lane.result = ballot != 0; break;
      case WarpOp::All: lane.result = ballot == group.mask; break;
      default: {
        const int source = source_lane(lane);
        if (source < 0) {
          lane.result = lane.value;
        } else if (((group.mask >> source) & 1u) == 0) {
          fault_at(lane, cat(call(lane), " reads lane ", source, ", which is not in the mask"));
        } else {
          lane.result = lane_of(me, static_cast<unsigned>(source)).value;
        }
      }
    }
    if (&lane != &me) make_ready(lane);
  }
}

unsigned BlockExecutor::active_mask() const {
  const WarpState& warp = warps_[current().warp];
  return warp.lanes & ~warp.exited;
}

void BlockExecutor::print_state() const {
  std::fprintf(stderr, "kernel %s, block %s, %zu threads:\n", launch_->kernel.c_str(), coordinates(block_).c_str(),
               threads_.size());
  for (const CudaThread& t : threads_) {
    std::string what;
    switch (t.state) {
      case State::NotStarted: what = "not started"; break;
      case State::Running: what = "running"; break;
      case State::Ready: what = "ready to resume"; break;
      case State::AtBarrier: what = "waits at __syncthreads"; break;
      case State::InCollective: what = cat("waits in ", call(t)); break;
      case State::Exited: what = "exited"; break;
    }
    std::fprintf(stderr, "  thread %s (warp %u, lane %u): %s\n", coordinates(t.index).c_str(), t.warp, t.lane,
                 what.c_str());
  }
}

// ---------------------------------------------------------------- faults

// No thread can run, yet some have not finished: find a collective that waits for a lane that will never
// come, and say why it will not.
void BlockExecutor::diagnose_deadlock() {
  for (const CudaThread& thread : threads_) {
    if (thread.state != State::InCollective) continue;
    const WarpState& warp = warps_[thread.warp];
    const auto group = std::find_if(warp.pending.begin(), warp.pending.end(),
                                    [&](const PendingCollective& g) { return g.mask == thread.mask; });
    const unsigned missing = thread.mask & ~(group == warp.pending.end() ? 0u : group->arrived);
    const CudaThread& other = threads_[thread.warp * kWarpSize + static_cast<unsigned>(std::countr_zero(missing))];
    const std::string waits_for =
        cat(call(thread), " waits for lane ", other.lane, " (thread ", coordinates(other.index), "), which ");
    if (other.state == State::AtBarrier) {
      set_fault(thread, cat(waits_for, "waits at __syncthreads: the block can never continue"));
    } else if (other.state == State::InCollective) {
      set_fault(thread, cat(waits_for, "waits in ", call(other),
                            ": every lane of a mask must call the same collective with the same mask"));
    } else {
      set_fault(thread, cat(waits_for, "never arrives"));
    }
    return;
  }
  set_fault(*barrier_waiters_.front(), "waits at a __syncthreads that can never complete");
}

std::string BlockExecutor::call(const CudaThread& thread) const {
  return cat(op_name(thread.op), "(mask ", hex(thread.mask), ")");
}

std::string BlockExecutor::where(const CudaThread& thread) const {
  return cat("kernel ", launch_->kernel, ", block ", coordinates(block_), ", thread ", coordinates(thread.index));
}

// ---------------------------------------------------------------- asynchronous copies (cp.async)

void BlockExecutor::async_copy(void* dst, const void* src, size_t bytes, size_t zfill) {
  CudaThread& thread = current();
  const auto fail = [&](const auto&... parts) {
    fault_at(thread, cat("__pipeline_memcpy_async(", dst, ", ", src, ", ", bytes, ", ", zfill, "): ", parts...));
  };
  if (bytes != 4 && bytes != 8 && bytes != 16) fail("copies 4, 8 or 16 bytes");
  if (zfill > bytes) fail("zfill is more than the bytes copied");
  const auto* d = static_cast<std::byte*>(dst);
  const auto* shared = shared_.get();
  if (d < shared || d + bytes > shared + launch_->dynamic_shared_bytes)
    fail("the destination is not in the block's dynamic shared memory (", launch_->dynamic_shared_bytes, " bytes at ",
         static_cast<const void*>(shared), "; the emulator models copies into dynamic shared memory)");
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 || reinterpret_cast<uintptr_t>(src) % bytes != 0)
    fail("source and destination must be aligned to the bytes copied");
  const size_t read = bytes - zfill;
  if (!last_source_ || !inside(*last_source_, src, read)) last_source_ = find_allocation(src);
  if (!last_source_ || !inside(*last_source_, src, read)) fail("the source is not ", read, " bytes of device memory");
  const AsyncCopy copy{static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), static_cast<uint32_t>(bytes),
                       static_cast<uint32_t>(zfill), 0};
  // Shuffled (LAB_EMU_SEED), a copy lands at once half the time: then a kernel that refills a buffer before every
  // thread has finished reading it (a missing barrier) reads the new contents, as it may on a GPU. Otherwise it
  // lands in the wait that covers it, the latest moment allowed.
  if (shuffled_ && rng_.below(2) == 0) return land(copy);
  ThreadCopies& copies = async_[static_cast<size_t>(&thread - threads_.data())];
  copies.pending.push_back(copy);
  copies.pending.back().batch = copies.committed;
}

void BlockExecutor::land(const AsyncCopy& copy) {
  const size_t read = copy.bytes - copy.zfill;
  std::memcpy(copy.dst, copy.src, read);
  std::memset(copy.dst + read, 0, copy.zfill);
}

void BlockExecutor::async_commit() {
  ++async_[static_cast<size_t>(&current() - threads_.data())].committed;
}

// Completes the copies of every committed batch but the `prior` most recent (copies not committed yet stay).
void BlockExecutor::async_wait_prior(size_t prior) {
  ThreadCopies& copies = async_[static_cast<size_t>(&current() - threads_.data())];
  if (copies.committed <= prior) return;
  const uint64_t done_below = copies.committed - prior;
  auto waiting = copies.pending.begin();
  for (const AsyncCopy& copy : copies.pending) {
    if (copy.batch >= done_below) {
      *waiting++ = copy;
      continue;
    }
    land(copy);
  }
  copies.pending.erase(waiting, copies.pending.end());
}

void BlockExecutor::set_fault(const CudaThread& named, const std::string& what) {
  if (!fault_) fault_ = cat(where(named), ": ", what);
}

// From inside a fiber: records the fault and leaves the block for good (the scheduler stops at once).
void BlockExecutor::fault_at(const CudaThread& named, const std::string& what) {
  set_fault(named, what);
  Fiber::switch_to(current().runner->fiber, scheduler_);
  std::fprintf(stderr, "lab cuda emulation: a faulted block was resumed\n");
  std::abort();
}

}  // namespace

std::optional<std::string> run_block(const GridLaunch& launch, uint3 block) {
  thread_local BlockExecutor executor;
  return executor.run(launch, block);
}

// ---------------------------------------------------------------- the device side of the headers

namespace device {

uint64_t warp_collective(WarpOp op, unsigned int mask, uint64_t value, int arg, int width) {
  return running_executor(op_name(op)).warp_collective(op, mask, value, arg, width);
}

void warp_task(WarpOp op, unsigned int mask, void* lane_data, WarpTask task) {
  running_executor(op_name(op)).warp_task(op, mask, lane_data, task);
}

void sync_threads() {
  running_executor("__syncthreads").sync_threads();
}

unsigned int active_mask() {
  return running_executor("__activemask").active_mask();
}

void* dynamic_shared_memory() {
  return running_executor("dynamic shared memory").dynamic_shared();
}

size_t dynamic_shared_bytes() {
  return running_executor("dynamic shared memory").dynamic_shared_bytes();
}

void async_copy(void* dst_shared, const void* src_global, size_t bytes, size_t zfill) {
  running_executor("__pipeline_memcpy_async").async_copy(dst_shared, src_global, bytes, zfill);
}

void async_commit() {
  running_executor("__pipeline_commit").async_commit();
}

void async_wait_prior(size_t prior) {
  running_executor("__pipeline_wait_prior").async_wait_prior(prior);
}

}  // namespace device

}  // namespace lab::cuda::emu

// For a debugger stopped inside a kernel: `call lab_emu_block_state()` lists the threads of the block this OS
// thread is running and what each is doing (running, waiting at a barrier or in a collective, exited, ...).
extern "C" void lab_emu_block_state() {
  if (lab::cuda::emu::t_running == nullptr) {
    std::fprintf(stderr, "no block is running on this thread\n");
    return;
  }
  lab::cuda::emu::t_running->print_state();
}
