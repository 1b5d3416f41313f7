// The emulator's settings, read once from the environment (README.md lists them):
//
//   LAB_EMU_WORKERS   OS threads that run the blocks of a grid (default: the hardware's thread count)
//   LAB_EMU_SEED      when set, blocks and fibers run in an order shuffled by this seed (to expose races)
//   LAB_EMU_STACK_KB  the stack of one fiber (default 64 KiB, 256 KiB under AddressSanitizer)
//   LAB_EMU_MEMORY    the emulated device memory, in bytes or with a K/M/G/T suffix (default 80G)
//   LAB_EMU_DEVICES   the number of emulated GPUs (default 1)
//   LAB_EMU_DEADLOCK_SECONDS  how long a host thread waits on work held by a running host function before the
//                     emulator calls it a deadlock and ends the process (default 30; 0: wait forever)
//   LAB_EMU_DRY_RUN   1: kernels, cuBLAS/cuBLASLt products, memsets and device-to-device copies are checked and
//                     counted but not run (dry_run.h); 0 or unset: everything runs
//
// A malformed value is one clear line on stderr and exit status 2: the emulator cannot run as asked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace lab::cuda::emu {

struct Settings {
  int workers = 1;
  std::optional<uint64_t> seed;
  size_t fiber_stack_bytes = 0;
  size_t device_memory_bytes = 0;
  int device_count = 1;
  int deadlock_seconds = 30;
  bool dry_run = false;
};

const Settings& settings();

}  // namespace lab::cuda::emu
