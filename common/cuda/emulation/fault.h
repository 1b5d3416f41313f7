// What went wrong on the emulated GPU, in words (LAB_CUDA_EMULATION only).
//
// When a kernel misuses a barrier or a warp collective, or is passed a host pointer, the emulated device
// faults as a GPU does: its error becomes sticky (every later call returns it until cudaDeviceReset). The
// error code alone says little ("unspecified launch failure"), so the emulator keeps the fault's
// description, e.g. "kernel causal_softmax_kernel, block (3,0,0), thread (37,0,0): __shfl_xor_sync(mask
// 0xffffffff) includes lane 5 (thread (5,0,0)), which has exited", prints it to stderr when it happens, and
// returns it here so that an error report can carry it.
#pragma once

#include <string>

namespace lab::cuda::emu {

// The description of the fault that made the current device's error sticky; empty when there is none.
std::string last_fault();

}  // namespace lab::cuda::emu
