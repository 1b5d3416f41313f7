// The pause between two polls of a waiting rank, and the description of whom it waits for.
#include "common/comm/waiting.h"

#include <thread>

#include "common/core/error.h"

namespace lab::comm {

using namespace std::chrono_literals;

void pause_before_next_poll(std::chrono::steady_clock::duration waited) {
  if (waited < 1ms)
    std::this_thread::yield();
  else if (waited < 100ms)
    std::this_thread::sleep_for(50us);
  else
    std::this_thread::sleep_for(1ms);
}

std::string every_rank(int rank, int size) {
  return size == 2 ? cat("rank ", 1 - rank, " to call it") : cat("all ", size, " ranks to call it");
}

}  // namespace lab::comm
