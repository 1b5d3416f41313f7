// Where a tensor lives. CPU memory, or the memory of one CUDA GPU.
#pragma once

#include <cstdint>
#include <string>

namespace lab {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

// Parses "cpu", "cuda", "cuda:N"; throws InvalidArgument otherwise.
Device parse_device(const std::string& name);
// The same, and "auto": best_device(). What a program's --device flag takes.
Device parse_device_or_auto(const std::string& name);

// True when this build has CUDA and at least one GPU is visible.
bool cuda_available();

// CUDA when available, else CPU: the default for programs that should use the best device present.
Device best_device();

// Waits until all work queued on the device has finished (a no-op for the CPU): needed before reading a
// host clock around GPU work.
void synchronize(Device device);

// The CPU's model name from /proc/cpuinfo ("AMD EPYC"), "unknown" when it names none.
std::string cpu_model_name();

// "NVIDIA H100 80GB HBM3" for a GPU; the CPU model name for the CPU.
std::string device_name(Device device);

// TF32 tensor-core math for fp32 matrix products on `device` (CUDA only; Unsupported on the CPU).
void set_tf32(Device device, bool enabled);

}  // namespace lab
