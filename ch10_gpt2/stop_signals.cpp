#include "ch10_gpt2/stop_signals.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "common/core/error.h"

namespace lab {

namespace {

std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

// Composed once at installation: a handler must not format or allocate.
struct Message {
  char text[256];
  size_t length = 0;

  void compose(const char* program, const char* what) {
    const int n = std::snprintf(text, sizeof text, "%s: %s\n", program, what);
    length = static_cast<size_t>(std::clamp<int>(n, 0, sizeof text - 1));
  }
  // A failed write of a message is of no consequence, and a handler could not report it anyway.
  void write() const { [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text, length); }
};
Message first_signal_message, second_signal_message;

void on_stop_signal(int signal) {
  int expected = 0;
  if (received.compare_exchange_strong(expected, signal)) {
    first_signal_message.write();
    return;
  }
  second_signal_message.write();
  ::_exit(128 + signal);
}

}  // namespace

void install_stop_handlers(const char* program) {
  first_signal_message.compose(program, "stopping after the current step (a second signal stops at once)");
  second_signal_message.compose(program, "second signal: stopped at once; any checkpoint written so far is complete");
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Restart interrupted system calls: a read or a wait in a loader thread must not fail because a signal
  // arrived, since the first signal only asks the loop to stop at the next step boundary.
  action.sa_flags = SA_RESTART;
  for (const int signal : {SIGINT, SIGTERM})
    LAB_CHECK(::sigaction(signal, &action, nullptr) == 0, Internal, "cannot install the handler of signal ", signal,
              ": ", std::strerror(errno));
}

int stop_signal() {
  return received.load();
}

}  // namespace lab
