#include "common/cuda/emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define LAB_EMU_ASAN 1
#else
#define LAB_EMU_ASAN 0
#endif

namespace lab::cuda::emu {

namespace fc = boost::context::detail;

namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// AddressSanitizer's fiber protocol; nothing without it.
void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#if LAB_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save;
  (void)bottom;
  (void)size;
#endif
}

void finish_switch(void* fake_stack, const void** bottom_old, size_t* size_old) {
#if LAB_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
#else
  (void)fake_stack;
  (void)bottom_old;
  (void)size_old;
#endif
}

}  // namespace

// ---------------------------------------------------------------- FiberStack

FiberStack::FiberStack(size_t bytes) {
  const size_t page = page_size();
  size_ = (bytes + page - 1) / page * page;
  mapping_bytes_ = size_ + page;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) {
    std::fprintf(stderr, "lab cuda emulation: cannot map a fiber stack of %zu bytes\n", mapping_bytes_);
    std::abort();
  }
  mprotect(mapping_, page, PROT_NONE);  // the guard page
  bottom_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() {
  munmap(mapping_, mapping_bytes_);
}

// ---------------------------------------------------------------- Fiber

void Fiber::start(FiberStack& stack, void (*entry)(void*), void* arg, bool stack_was_abandoned) {
#if LAB_EMU_ASAN
  if (stack_was_abandoned) __asan_unpoison_memory_region(stack.bottom(), stack.size());
#else
  (void)stack_was_abandoned;
#endif
  stack_ = &stack;
  entry_ = entry;
  arg_ = arg;
  finished_ = false;
  fake_stack_ = nullptr;
  // fcontext takes the top of the stack: it grows down from there.
  void* top = static_cast<char*>(stack.bottom()) + stack.size();
  context_ = fc::make_fcontext(top, stack.size(), [](fc::transfer_t t) { trampoline(&t); });
}

void Fiber::resume() {
  void* scheduler_fake_stack = nullptr;
  start_switch(&scheduler_fake_stack, stack_->bottom(), stack_->size());
  const fc::transfer_t back = fc::jump_fcontext(context_, this);
  finish_switch(scheduler_fake_stack, nullptr, nullptr);
  context_ = back.fctx;
}

void Fiber::suspend() {
  start_switch(&fake_stack_, scheduler_bottom_, scheduler_size_);
  const fc::transfer_t back = fc::jump_fcontext(scheduler_, nullptr);
  finish_switch(fake_stack_, &scheduler_bottom_, &scheduler_size_);
  scheduler_ = back.fctx;
}

void Fiber::trampoline(void* transfer) {
  const fc::transfer_t t = *static_cast<fc::transfer_t*>(transfer);
  Fiber& self = *static_cast<Fiber*>(t.data);
  self.scheduler_ = t.fctx;
  finish_switch(nullptr, &self.scheduler_bottom_, &self.scheduler_size_);
  self.entry_(self.arg_);
  self.finished_ = true;
  // The last switch: a null fake-stack slot tells AddressSanitizer this fiber's stack is done with.
  start_switch(nullptr, self.scheduler_bottom_, self.scheduler_size_);
  fc::jump_fcontext(self.scheduler_, nullptr);
  __builtin_unreachable();  // nobody resumes a finished fiber
}

}  // namespace lab::cuda::emu
