// Device memory is host memory, kept in a registry of allocations: cudaMalloc'd blocks (counted against the
// device's emulated capacity, LAB_EMU_MEMORY) and pinned host buffers (cudaHostAlloc). The registry is what
// lets the emulator answer cudaPointerGetAttributes, check that a copy stays inside its allocation, and
// refuse a kernel argument that points into ordinary host memory.
#pragma once

#include <cstddef>
#include <optional>

namespace lab::cuda::emu {

enum class MemoryKind { Device, Pinned };

struct Allocation {
  const std::byte* base = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Device;
  int device = 0;
  bool mapped = false;  // a dry run's large block: mapped without reserving host memory (dry_run.h), unmapped
};

// The allocation that `ptr` points into, or one past the end of (a valid end pointer); nullopt otherwise.
std::optional<Allocation> find_allocation(const void* ptr);

// True when [ptr, ptr + bytes) lies inside one allocation.
bool inside(const Allocation& allocation, const void* ptr, size_t bytes);

}  // namespace lab::cuda::emu
