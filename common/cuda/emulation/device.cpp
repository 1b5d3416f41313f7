// Devices, errors and faults; the device-level runtime calls.
#include "common/cuda/emulation/device.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/cuda/emulation/fault.h"
#include "common/cuda/emulation/memory.h"
#include "common/cuda/emulation/settings.h"
#include "common/cuda/emulation/streams.h"

namespace lab::cuda::emu {

namespace {

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

struct Fault {
  cudaError_t code = cudaSuccess;
  std::string message;
};

std::mutex g_fault_mutex;

// Never destroyed: a stream thread may still check its device's fault while the process exits (work queued
// by a program that ends without synchronising), after static destructors have run.
std::vector<Fault>& faults() {
  static auto* const all = new std::vector<Fault>(static_cast<size_t>(device_count()));
  return *all;
}

cudaDeviceProp make_properties(int device) {
  cudaDeviceProp p{};
  // A dry run says so wherever a program names its GPU (logs, bench JSON): its times are not a GPU's, nor an emulated
  // run's (dry_run.h).
  std::snprintf(p.name, sizeof p.name, "Emulated NVIDIA H100 (LAB_CUDA_EMULATION%s)",
                settings().dry_run ? ", LAB_EMU_DRY_RUN: no kernel runs" : "");
  p.totalGlobalMem = settings().device_memory_bytes;
  p.sharedMemPerBlock = 48 * 1024;
  p.regsPerBlock = 65536;
  p.warpSize = 32;
  p.memPitch = 2147483647;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = 1024;
  p.maxThreadsDim[1] = 1024;
  p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 2147483647;
  p.maxGridSize[1] = 65535;
  p.maxGridSize[2] = 65535;
  p.totalConstMem = 65536;
  p.major = 9;
  p.minor = 0;
  p.multiProcessorCount = 132;
  p.integrated = 0;
  p.canMapHostMemory = 1;
  p.concurrentKernels = 1;
  p.ECCEnabled = 1;
  p.pciBusID = device;
  p.pciDeviceID = 0;
  p.pciDomainID = 0;
  p.asyncEngineCount = 2;
  p.unifiedAddressing = 1;
  p.memoryBusWidth = 5120;
  p.l2CacheSize = 50 * 1024 * 1024;
  p.maxThreadsPerMultiProcessor = 2048;
  p.sharedMemPerMultiprocessor = 228 * 1024;
  p.regsPerMultiprocessor = 65536;
  p.managedMemory = 1;
  p.sharedMemPerBlockOptin = 227 * 1024;
  p.maxBlocksPerMultiProcessor = 32;
  p.reservedSharedMemPerBlock = 1024;
  return p;
}

}  // namespace

int device_count() {
  return settings().device_count;
}

bool valid_device(int device) {
  return device >= 0 && device < device_count();
}

int current_device() {
  return t_device;
}

void set_current_device(int device) {
  t_device = device;
}

cudaError_t record(cudaError_t error) {
  if (error != cudaSuccess && error != cudaErrorNotReady) t_last_error = error;
  return error;
}

cudaError_t take_last_error() {
  if (const cudaError_t sticky = sticky_error(t_device); sticky != cudaSuccess) return sticky;
  const cudaError_t error = t_last_error;
  t_last_error = cudaSuccess;
  return error;
}

cudaError_t peek_last_error() {
  if (const cudaError_t sticky = sticky_error(t_device); sticky != cudaSuccess) return sticky;
  return t_last_error;
}

cudaError_t sticky_error(int device) {
  if (!valid_device(device)) return cudaSuccess;
  std::lock_guard<std::mutex> lock(g_fault_mutex);
  return faults()[static_cast<size_t>(device)].code;
}

void raise_fault(int device, cudaError_t code, const std::string& message) {
  std::fprintf(stderr, "lab cuda emulation: device %d fault, %s: %s\n", device, cudaGetErrorName(code),
               message.c_str());
  std::lock_guard<std::mutex> lock(g_fault_mutex);
  Fault& fault = faults()[static_cast<size_t>(device)];
  if (fault.code != cudaSuccess) return;
  fault.code = code;
  fault.message = message;
}

void clear_fault(int device) {
  std::lock_guard<std::mutex> lock(g_fault_mutex);
  faults()[static_cast<size_t>(device)] = Fault{};
}

std::string last_fault() {
  if (!valid_device(t_device)) return {};
  std::lock_guard<std::mutex> lock(g_fault_mutex);
  return faults()[static_cast<size_t>(t_device)].message;
}

const cudaDeviceProp& device_properties(int device) {
  static const std::vector<cudaDeviceProp> all = [] {
    std::vector<cudaDeviceProp> props;
    for (int d = 0; d < device_count(); ++d) props.push_back(make_properties(d));
    return props;
  }();
  return all[static_cast<size_t>(device)];
}

}  // namespace lab::cuda::emu

// ---------------------------------------------------------------- the runtime calls

using namespace lab::cuda::emu;

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return record(cudaErrorInvalidValue);
  *count = device_count();
  return record(*count == 0 ? cudaErrorNoDevice : cudaSuccess);
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return record(cudaErrorInvalidValue);
  if (device_count() == 0) return record(cudaErrorNoDevice);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device_count() == 0) return record(cudaErrorNoDevice);
  if (!valid_device(device)) return record(cudaErrorInvalidDevice);
  set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return record(cudaErrorInvalidValue);
  if (!valid_device(device)) return record(cudaErrorInvalidDevice);
  *prop = device_properties(device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return record(cudaErrorInvalidValue);
  if (!valid_device(device)) return record(cudaErrorInvalidDevice);
  const cudaDeviceProp& p = device_properties(device);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrTotalConstantMemory: *value = static_cast<int>(p.totalConstMem); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrClockRate: *value = 1980000; break;  // kHz, the H100 SXM boost clock
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrIntegrated: *value = p.integrated; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: *value = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrMemoryClockRate: *value = 2619000; break;  // kHz, HBM3
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(p.sharedMemPerMultiprocessor); break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    default: return record(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// The emulation is its own driver: both report the runtime API version these headers stand in for.
cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return record(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return record(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  if (const cudaError_t refused = refuse_during_capture(nullptr, device, cudaErrorStreamCaptureUnsupported);
      refused != cudaSuccess)
    return refused;
  synchronize_device(device, "cudaDeviceSynchronize");
  return record(sticky_error(device));
}

// Waits for the device's work and forgets its fault. Unlike a real reset, allocations, streams and events
// stay valid (code that holds them must not rely on that).
cudaError_t cudaDeviceReset() {
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  synchronize_device(device, "cudaDeviceReset");
  clear_fault(device);
  take_last_error();
  return cudaSuccess;
}
