// The emulator's dry run (LAB_CUDA_EMULATION only): a program's allocations and launches without its arithmetic.
//
// A d12 GPT-2 step at B = 32 takes the emulator some 45 minutes on two cores, nearly all of it in kernels and
// GEMMs, while what a memory question needs (how much the caching allocator holds at its peak, how many blocks
// it asked cudaMalloc for, how many kernels a step launches) depends on shapes alone. In a dry run every call is
// still checked as before (launch configurations, kernel arguments that are not device pointers, capture
// rules, stream order, sticky errors) and every launch counted, but kernels, cuBLAS/cuBLASLt products, memsets
// and device-to-device copies do nothing. Copies from and to the host still run, so the program reads back
// bytes (zeros, for memory nothing was copied into) and goes on. New device memory is not filled with 0xff
// (blocks above 1 MiB are not touched at all, and are mapped without reserving host memory, so a dry run of a
// 13 GB step costs the host little memory and one of an 80 GB GPU's runs on a smaller host; smaller ones are
// zeroed, so that a loss or a norm read back is a finite 0 and the training loop goes on).
//
// Every computed value is meaningless in a dry run; the allocator's figures are those of the real run
// (tests/ch10_gpt2/test_dry_run_memory_cuda.cpp compares them).
#pragma once

namespace lab::cuda::emu {

// Whether work queued from now on is only checked and counted: LAB_EMU_DRY_RUN=1, or set_dry_run(true).
bool dry_run();

// Turns the dry run on or off for work queued from now on (for tests; a program sets LAB_EMU_DRY_RUN).
void set_dry_run(bool on);

}  // namespace lab::cuda::emu
