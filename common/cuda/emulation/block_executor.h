// The block executor: runs one block of a kernel launch on the calling OS thread, each CUDA thread as a
// fiber, and checks the block's use of barriers and warp collectives.
//
// Scheduling. A fiber runs until its CUDA thread reaches a __syncthreads, a warp collective or its end;
// only there does it switch, straight to the next fiber with work (a released thread, or a new runner for the
// threads not started yet); the scheduler is switched back to only when there is none. Most kernels have no
// barrier at all: there one fiber ("runner") simply runs the threads of the block one after another, with no
// switch, and a second runner starts only when a thread blocks. So a fiber (and a stack) is needed per
// *waiting* thread, not per thread, and an elementwise kernel costs little more than a loop over its threads.
//
//   __syncthreads    the thread waits until every thread of the block has arrived; the last to arrive
//                    releases the others and carries on
//   warp collective  the lane leaves its value in its slot and waits until every lane of the mask has called
//                    the same collective with the same mask; the last to arrive computes every lane's result
//                    into that lane's slot, so one rendezvous suffices and a lane may move on to the next
//                    collective at once (its slot is read again only after everyone has its result)
//
// Misuse is a fault naming the kernel, the block and the thread: a barrier that a thread of the block
// cannot reach (it has exited, or it waits in a warp collective that cannot complete), a collective mask
// that omits the calling lane or includes a lane that does not exist, has exited or waits elsewhere, a
// shuffle that reads a lane outside its mask, lanes of one mask calling different collectives. With a seed
// (LAB_EMU_SEED) the order in which threads start and resume is shuffled, and the last thread to arrive at
// a barrier yields instead of carrying on, so code that relies on an order it was never promised (a missing
// barrier) sees a different one. Each interval between two barriers then runs, at random, in one of two orders:
// the threads interleaved at random at every barrier and collective, or warp by warp (a random order of the
// warps, each run as far as it can go before the next resumes, its lanes shuffled). The first finds races
// between threads that a fixed order hides; the second the races that need one warp far ahead of another (a
// buffer refilled by a fast warp while a slow one still reads it), which interleaving at every collective keeps
// in step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "vector_types.h"

namespace lab::cuda::emu {

// One kernel launch, as the executor sees it.
struct GridLaunch {
  std::string kernel;  // the name faults are reported under
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  void (*run_thread)(const void* bound) = nullptr;  // runs the kernel's body for the current CUDA thread
  const void* bound = nullptr;                      // its arguments
  std::optional<uint64_t> seed;                     // shuffled schedule when set
  uint64_t launch_index = 0;                        // mixed into the seed: launches differ
};

// Runs block `block` of `launch` to its end on the calling OS thread. Returns the fault message when the
// block misused a barrier or a warp collective (the block is then abandoned where it stood).
std::optional<std::string> run_block(const GridLaunch& launch, uint3 block);

}  // namespace lab::cuda::emu
