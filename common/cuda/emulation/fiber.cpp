#include "common/cuda/emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

#if LAB_EMU_ASAN
// How much of the top of a stack a fiber's last frames can cover: the entry lambda, trampoline and the switch_to
// that never returns (a few hundred bytes), with room to spare.
constexpr size_t kLastFramesBytes = 8192;
#endif

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

// What a switch hands over: the context that switched (its continuation is stored in it on arrival) and the
// one switched to (which a fiber's first run learns itself from). It lives on the switching side's stack, which
// stays put until that side is resumed.
struct Fiber::Switch {
  Fiber* from;
  Fiber* to;
};

void Fiber::start(FiberStack& stack, void (*entry)(void*), void* arg, bool stack_was_abandoned, Fiber& exit_to) {
#if LAB_EMU_ASAN
  // AddressSanitizer marks each instrumented frame's redzones on entry and clears them on return. A fiber that
  // never finished leaves all its frames marked; one that finished leaves those of its last switch, which never
  // returns (trampoline, switch_to), at the top of the stack. An instrumented frame placed there later marks
  // itself afresh, but code the sanitizer did not compile does not, and the sanitizer checks what it writes:
  // __asan_handle_no_return, which the entry lambda calls before trampoline (declared never to return), reads
  // sigaltstack into a local of its own frame, and where that local lands on an old redzone it reports a
  // stack-buffer-overflow that is not one. So the next fiber on the stack starts with those marks cleared.
  const size_t marked = stack_was_abandoned ? stack.size() : std::min(stack.size(), kLastFramesBytes);
  __asan_unpoison_memory_region(static_cast<char*>(stack.bottom()) + stack.size() - marked, marked);
#else
  (void)stack_was_abandoned;
#endif
  stack_ = &stack;
  entry_ = entry;
  arg_ = arg;
  exit_to_ = &exit_to;
  finished_ = false;
  fake_stack_ = nullptr;
  stack_bottom_ = stack.bottom();
  stack_size_ = stack.size();
  // fcontext takes the top of the stack: it grows down from there.
  void* top = static_cast<char*>(stack.bottom()) + stack.size();
  context_ = fc::make_fcontext(top, stack.size(), [](fc::transfer_t t) { trampoline(&t); });
}

void Fiber::switch_to(Fiber& from, Fiber& to) {
  // A finished fiber's last switch: a null fake-stack slot tells AddressSanitizer its stack is done with.
  start_switch(from.finished_ ? nullptr : &from.fake_stack_, to.stack_bottom_, to.stack_size_);
  Switch handover{&from, &to};
  const fc::transfer_t back = fc::jump_fcontext(to.context_, &handover);
  from.arrived(*static_cast<const Switch*>(back.data), back.fctx);
}

// On this context's stack, just after a switch into it: the context that switched continues at `its_context`.
void Fiber::arrived(const Switch& handover, void* its_context) {
  const void* bottom = nullptr;
  size_t size = 0;
  finish_switch(fake_stack_, &bottom, &size);
  Fiber& from = *handover.from;
  from.context_ = its_context;
  if (from.stack_ == nullptr) {  // the OS thread's stack: AddressSanitizer knows its bounds
    from.stack_bottom_ = bottom;
    from.stack_size_ = size;
  }
}

void Fiber::trampoline(void* transfer) {
  const fc::transfer_t t = *static_cast<fc::transfer_t*>(transfer);
  const Switch& handover = *static_cast<const Switch*>(t.data);
  Fiber& self = *handover.to;
  self.arrived(handover, t.fctx);
  self.entry_(self.arg_);
  self.finished_ = true;
  switch_to(self, *self.exit_to_);
  __builtin_unreachable();  // nobody switches to a finished fiber
}

}  // namespace lab::cuda::emu
