#include "common/core/device.h"

#include "common/core/error.h"

#ifdef LAB_WITH_CUDA
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
    if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos)
      return Device::cuda(std::stoi(idx));
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

Device best_device() { return cuda_available() ? Device::cuda(0) : Device::cpu(); }

}  // namespace lab
