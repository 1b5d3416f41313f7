// Fibers: functions that run on stacks of their own and switch to and from a scheduler on the same OS
// thread. A switch saves the callee-saved registers and the stack pointer of one side and restores the
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

class Fiber {
 public:
  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares entry(arg) to run on `stack` at the next resume(). The stack must not be in use by another
  // fiber; `stack_was_abandoned` says whether the last fiber on it never finished (its frames are still
  // marked in AddressSanitizer's shadow and must be cleared).
  void start(FiberStack& stack, void (*entry)(void*), void* arg, bool stack_was_abandoned);

  // From the scheduler: runs the fiber until it calls suspend() or its entry function returns.
  void resume();

  // From inside the fiber: back to the scheduler; returns when the scheduler resumes this fiber.
  void suspend();

  bool finished() const { return finished_; }

 private:
  static void trampoline(void* transfer);

  void* context_ = nullptr;    // where the fiber continues (fcontext_t)
  void* scheduler_ = nullptr;  // where suspend() returns to (fcontext_t)
  FiberStack* stack_ = nullptr;
  void (*entry_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool finished_ = true;
  // AddressSanitizer's view of the switch: the fiber's fake stack and the scheduler's stack bounds.
  void* fake_stack_ = nullptr;
  const void* scheduler_bottom_ = nullptr;
  size_t scheduler_size_ = 0;
};

}  // namespace lab::cuda::emu
