// How a rank waits for the others, shared by the backends that poll for completion (MPI, NCCL): the pause
// between two polls, and what an error says the rank was waiting for.
#pragma once

#include <chrono>
#include <string>

namespace lab::comm {

// A waiting rank polls hard at first (the other ranks are usually microseconds behind), then backs off so
// that it does not take a core from ranks that are still computing (the tests run 4 ranks on 2 cores). The
// pauses stay short because MPI advances a non-blocking collective only inside MPI_Test. `waited` is the
// time since the wait began.
void pause_before_next_poll(std::chrono::steady_clock::duration waited);

// What a collective waits for, as a timeout reports it: with two ranks, the other one ("rank 1 to call it");
// with more, a waiting rank cannot tell which are missing ("all 4 ranks to call it").
std::string every_rank(int rank, int size);

}  // namespace lab::comm
