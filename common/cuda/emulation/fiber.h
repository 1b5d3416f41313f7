// Fibers: functions that run on stacks of their own and switch to one another, and to and from the scheduler,
// on the same OS thread. A switch saves the callee-saved registers and the stack pointer of one side and restores the
// other's (Boost.Context's fcontext, a few nanoseconds): no system call, no kernel scheduler.
//
// The emulator runs the CUDA threads of a block as fibers (block_executor.h). Stacks are mapped once and
// reused; each has an inaccessible guard page below it (stacks grow down), so a kernel that overflows its
// stack faults at once instead of writing over its neighbour's. Under AddressSanitizer every switch is
// announced to it (__sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber), so that it checks
// each fiber against its own stack.
#pragma once

#include <cstddef>

namespace lab::cuda::emu {

class FiberStack {
 public:
  explicit FiberStack(size_t bytes);  // usable bytes; a guard page is added below
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  void* bottom() const { return bottom_; }  // lowest usable address
  size_t size() const { return size_; }

 private:
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  void* bottom_ = nullptr;
  size_t size_ = 0;
};

// A context to switch to and from: a fiber, or the OS thread's own stack (a Fiber never started stands for it:
// the scheduler). Any context may switch to any other of the same OS thread, directly: a CUDA thread that waits
// hands the OS thread straight to the next one, without a round trip through the scheduler.
class Fiber {
 public:
  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares entry(arg) to run on `stack` the next time a context switches to this fiber; when entry returns,
  // the fiber switches to `exit_to` for the last time. The stack must not be in use by another fiber;
  // `stack_was_abandoned` says whether the last fiber on it never finished (its frames are still marked in
  // AddressSanitizer's shadow and must be cleared).
  void start(FiberStack& stack, void (*entry)(void*), void* arg, bool stack_was_abandoned, Fiber& exit_to);

  // From `from`, the context running now, to `to`. Returns, on `from`'s stack, when a context switches back.
  static void switch_to(Fiber& from, Fiber& to);

 private:
  struct Switch;
  static void trampoline(void* transfer);
  void arrived(const Switch& handover, void* its_context);

  void* context_ = nullptr;      // where this context continues (fcontext_t), set when it switches away
  FiberStack* stack_ = nullptr;  // null for the OS thread's own stack
  void (*entry_)(void*) = nullptr;
  void* arg_ = nullptr;
  Fiber* exit_to_ = nullptr;
  bool finished_ = false;
  // AddressSanitizer's view of the switches: this context's fake stack, and the bounds of its stack (for the OS
  // thread's, learnt on the first switch away from it).
  void* fake_stack_ = nullptr;
  const void* stack_bottom_ = nullptr;
  size_t stack_size_ = 0;
};

}  // namespace lab::cuda::emu
