#include "common/core/device.h"

#include <fstream>
#include <optional>

#include "common/core/error.h"
#include "common/core/gpu_backend.h"

namespace lab {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : cat("cuda:", index);
}

namespace {

// "cpu", "cuda", "cuda:N" as a device; none otherwise.
std::optional<Device> named_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "cuda") return Device::cuda(0);
  if (name.rfind("cuda:", 0) == 0) {
    const std::string idx = name.substr(5);
    if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos) return Device::cuda(std::stoi(idx));
  }
  return std::nullopt;
}

}  // namespace

Device parse_device(const std::string& name) {
  if (const std::optional<Device> device = named_device(name)) return *device;
  fail(ErrorKind::InvalidArgument, "unknown device '", name, "' (expected cpu, cuda or cuda:N)");
}

Device parse_device_or_auto(const std::string& name) {
  if (name == "auto") return best_device();
  if (const std::optional<Device> device = named_device(name)) return *device;
  fail(ErrorKind::InvalidArgument, "unknown device '", name, "' (expected auto, cpu, cuda or cuda:N)");
}

const GpuBackend& require_gpu_backend(const std::string& what) {
  const GpuBackend* backend = gpu_backend();
  LAB_CHECK(backend, Unsupported, what, ": this build has no CUDA backend");
  return *backend;
}

bool cuda_available() {
  const GpuBackend* backend = gpu_backend();
  return backend && backend->device_count() > 0;
}

Device best_device() {
  return cuda_available() ? Device::cuda(0) : Device::cpu();
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
  require_gpu_backend(cat("synchronize(", device.str(), ")")).synchronize(device.index);
}

std::string cpu_model_name() {
  // x86 kernels write "model name"; ARM kernels write "Model" or "Hardware" instead.
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  for (const char* key : {"model name", "Model", "Hardware"}) {
    in.clear();
    in.seekg(0);
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos || line.rfind(key, 0) != 0) continue;
      const std::string label = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
      if (label != key) continue;
      const size_t start = line.find_first_not_of(' ', colon + 1);
      return start == std::string::npos ? "unknown" : line.substr(start);
    }
  }
  return "unknown";
}

std::string device_name(Device device) {
  if (device.is_cuda()) return require_gpu_backend(cat("device_name(", device.str(), ")")).device_name(device.index);
  return cpu_model_name();
}

void set_tf32(Device device, bool enabled) {
  LAB_CHECK(device.is_cuda(), Unsupported, "TF32 is a GPU tensor-core mode; the CPU computes in fp32");
  require_gpu_backend(cat("TF32 on ", device.str())).set_tf32(device.index, enabled);
}

}  // namespace lab
