#include "common/core/device.h"

#include <fstream>

#include "common/core/error.h"

#ifdef LAB_WITH_CUDA
#include "common/cuda/cublas.h"
#include "common/cuda/runtime.h"
#endif

namespace lab {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : cat("cuda:", index);
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "cuda") return Device::cuda(0);
  if (name.rfind("cuda:", 0) == 0) {
    const std::string idx = name.substr(5);
    if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos) return Device::cuda(std::stoi(idx));
  }
  fail(ErrorKind::InvalidArgument, "unknown device '", name, "' (expected cpu, cuda or cuda:N)");
}

bool cuda_available() {
#ifdef LAB_WITH_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

Device best_device() {
  return cuda_available() ? Device::cuda(0) : Device::cpu();
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
#ifdef LAB_WITH_CUDA
  cuda::DeviceGuard guard(device.index);  // the caller's current device is current again afterwards
  cuda::synchronize();
#else
  fail(ErrorKind::Unsupported, "synchronize(", device.str(), "): this build has no CUDA backend");
#endif
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
  if (device.is_cuda()) {
#ifdef LAB_WITH_CUDA
    return cuda::device_name(device.index);
#else
    fail(ErrorKind::Unsupported, "device_name(", device.str(), "): this build has no CUDA backend");
#endif
  }
  return cpu_model_name();
}

void set_tf32(Device device, bool enabled) {
  LAB_CHECK(device.is_cuda(), Unsupported, "TF32 is a GPU tensor-core mode; the CPU computes in fp32");
#ifdef LAB_WITH_CUDA
  // The switch is process-wide (common/cuda/cublas.h): the device is validated, the current one left alone.
  cuda::check_device_index(device.index);
  cuda::set_tf32(enabled);
#else
  (void)enabled;
  fail(ErrorKind::Unsupported, "TF32 on ", device.str(), ": this build has no CUDA backend");
#endif
}

}  // namespace lab
