// gpu_backend() of a build without the CUDA backend (common/core/gpu_backend.h): there is none.
#include "common/core/gpu_backend.h"

namespace lab {

const GpuBackend* gpu_backend() {
  return nullptr;
}

}  // namespace lab
