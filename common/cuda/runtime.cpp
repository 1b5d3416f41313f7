#include "common/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include "common/core/error.h"
#include "common/cuda/check.h"
#include "common/cuda/stream.h"

namespace lab::cuda {

int device_count() {
  // Counted once: the set of visible devices cannot change while a process runs. Without a driver or a
  // GPU the runtime returns an error, which is cleared here so that it does not surface at a later call.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

void check_device_index(int device) {
  const int count = device_count();
  if (device >= 0 && device < count) return;
  if (count == 0)
    fail(ErrorKind::InvalidArgument, "cuda:", device, " requested, but no GPU is visible (no CUDA driver or device)");
  fail(ErrorKind::InvalidArgument, "cuda:", device, " requested, but ", count, count == 1 ? " GPU is" : " GPUs are",
       " visible");
}

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) {
  check_device_index(device);
  CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::DeviceGuard(int device) {
  check_device_index(device);
  saved_ = current_device();
  if (saved_ != device) {
    CUDA_CHECK(cudaSetDevice(device));
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  // A destructor must not throw; restoring a device that was valid a moment ago does not fail.
  if (switched_) cudaSetDevice(saved_);
}

std::string device_name(int device) {
  check_device_index(device);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

PciLocation pci_location(int device) {
  check_device_index(device);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return {prop.pciDomainID, prop.pciBusID, prop.pciDeviceID};
}

int driver_version() {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return version;
}

int runtime_version() {
  int version = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&version));
  return version;
}

void synchronize() {
  CUDA_CHECK(cudaDeviceSynchronize());
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    // The copy runs on the destination's stream; the source's producer may still be running on its own.
    DeviceGuard src_guard(src_device.index);
    CUDA_CHECK(cudaStreamSynchronize(current_stream(src_device.index)));
  }
  DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  // Unified addressing lets the runtime infer the direction from the pointers.
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void memset_zero(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(device.index);
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, current_stream(device.index)));
}

}  // namespace lab::cuda
