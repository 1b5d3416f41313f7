// The host-side runtime of the CUDA backend: how many GPUs there are, which one is current, and the byte
// movers (copy, memset_zero) that the core reaches through gpu_backend.cpp when built with LAB_WITH_CUDA.
//
// This header is plain C++ (no CUDA headers), so any file of the project may include it. Kernels and the
// rest of the CUDA helpers live beside it in common/cuda/ and common/ops/cuda/.
#pragma once

#include <cstddef>
#include <string>

#include "common/core/device.h"

namespace lab::cuda {

// Number of visible GPUs; 0 when there is no driver or no device (never throws).
int device_count();

// Throws InvalidArgument unless 0 <= device < device_count(); the message names the device and how many
// GPUs are visible ("cuda:1 requested, but 1 GPU is visible").
void check_device_index(int device);

// The calling thread's current device, and a switch of it (validated as above).
int current_device();
void set_device(int device);

// Makes `device` current until the guard goes out of scope, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
  bool switched_ = false;
};

// The device's marketing name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3".
std::string device_name(int device);

// Where a GPU sits on the PCI bus: the same numbers in every process of a machine, whatever the process's
// CUDA_VISIBLE_DEVICES, so processes can tell whether their GPUs are one and the same.
struct PciLocation {
  int domain = 0, bus = 0, device = 0;
};
PciLocation pci_location(int device);

// The newest CUDA version the installed driver supports, as 1000 * major + 10 * minor (13000 for 13.0);
// 0 when there is no driver (never throws). runtime_version() is the CUDA runtime this build links.
int driver_version();
int runtime_version();

// Waits until all work queued on the current device, on every stream, has finished.
void synchronize();

// Synchronous copy between any two of host / device memory (device-to-device included). Runs on the
// current stream of the device involved (the destination's when both are GPUs) and waits for it, so
// the copy is ordered after all work queued there.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// Zeroes device memory on the current stream (asynchronous: ordered with later work on that stream).
void memset_zero(void* dst, Device device, size_t bytes);

}  // namespace lab::cuda
