// Kernel launches (see kernel_launch.h): the checks a GPU makes, the pointer check, and the run of a grid.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "common/cuda/emulation/block_executor.h"
#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/dry_run.h"
#include "common/cuda/emulation/kernel_launch.h"
#include "common/cuda/emulation/memory.h"
#include "common/cuda/emulation/settings.h"
#include "common/cuda/emulation/streams.h"
#include "common/cuda/emulation/worker_pool.h"

namespace lab::cuda::emu {

namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535, 65535};
constexpr int kDefaultDynamicShared = 48 * 1024;
constexpr int kMaxDynamicSharedOptIn = 227 * 1024;

// cudaFuncSetAttribute's dynamic shared memory limits, per kernel.
std::mutex g_attributes_mutex;
std::map<const void*, int> g_max_dynamic_shared;

int max_dynamic_shared(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_attributes_mutex);
  const auto it = g_max_dynamic_shared.find(kernel);
  return it == g_max_dynamic_shared.end() ? kDefaultDynamicShared : it->second;
}

bool valid_dims(dim3 d, const unsigned (&max)[3]) {
  return d.x >= 1 && d.y >= 1 && d.z >= 1 && d.x <= max[0] && d.y <= max[1] && d.z <= max[2];
}

cudaError_t check_configuration(const LaunchRequest& r) {
  if (!valid_dims(r.block, kMaxBlockDim) || !valid_dims(r.grid, kMaxGridDim)) return cudaErrorInvalidConfiguration;
  if (static_cast<uint64_t>(r.block.x) * r.block.y * r.block.z > kMaxThreadsPerBlock)
    return cudaErrorInvalidConfiguration;
  if (r.shared_bytes > static_cast<size_t>(max_dynamic_shared(r.kernel))) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// The first pointer argument that points into neither device nor pinned host memory, described.
std::string bad_pointer(const LaunchRequest& r) {
  for (const PointerArgument& p : r.pointers) {
    if (p.address == 0 || find_allocation(reinterpret_cast<const void*>(p.address))) continue;
    std::ostringstream out;
    out << "kernel " << r.kernel_name << ": argument " << p.index << " (0x" << std::hex << p.address << std::dec
        << ") points into neither device memory nor pinned host memory (a host pointer passed to a kernel?)";
    return out.str();
  }
  return {};
}

std::atomic<uint64_t> g_launches{0};

__extension__ typedef unsigned __int128 Wide;  // a * i of two 64-bit numbers

// Runs every block of the grid on the worker pool; the first fault stops the blocks not yet started.
void run_grid(const GridLaunch& launch, int device) {
  const dim3 g = launch.grid;
  const uint64_t blocks = static_cast<uint64_t>(g.x) * g.y * g.z;
  // With a seed, blocks are taken in a scrambled order: i -> (a * i + c) mod blocks, a coprime to blocks.
  uint64_t a = 1, c = 0;
  if (launch.seed) {
    a = (*launch.seed * 0x9e3779b97f4a7c15ull + launch.launch_index) % blocks | 1;
    while (std::gcd(a, blocks) != 1) a += 2;
    c = (*launch.seed ^ launch.launch_index) % blocks;
  }
  std::mutex fault_mutex;
  std::string fault;
  run_parallel(blocks, [&](uint64_t i) {
    const uint64_t linear = static_cast<uint64_t>((static_cast<Wide>(a) * i + c) % blocks);
    const uint3 block{static_cast<unsigned>(linear % g.x), static_cast<unsigned>(linear / g.x % g.y),
                      static_cast<unsigned>(linear / (static_cast<uint64_t>(g.x) * g.y))};
    std::optional<std::string> block_fault = run_block(launch, block);
    if (!block_fault) return true;
    std::lock_guard<std::mutex> lock(fault_mutex);
    if (fault.empty()) fault = std::move(*block_fault);
    return false;
  });
  if (!fault.empty()) raise_fault(device, cudaErrorLaunchFailure, fault);
}

// Lazy loading (CUDA_MODULE_LOADING=LAZY, CUDA's default since 12.2): a kernel is loaded at its first use,
// and loading may synchronise the device. The CUDA programming guide ("Lazy Loading") warns that code which
// counts on kernels running concurrently can deadlock; on an H100 and an H200 the first launch of a kernel,
// made while a host function held another stream, never returned. Modelled: the first launch of each kernel
// on a device (or its first cudaFuncSetAttribute) waits for all of the device's work, watched for deadlocks
// like every synchronous call; a launch into a capture loads without waiting.
std::mutex g_loaded_mutex;
std::set<std::pair<int, const void*>> g_loaded;

void load_kernel(int device, const void* kernel, const std::string& what, bool wait) {
  {
    std::lock_guard<std::mutex> lock(g_loaded_mutex);
    if (!g_loaded.insert({device, kernel}).second) return;
  }
  if (wait)
    synchronize_device(device, ("loading " + what +
                                " at its first use (lazy loading, which synchronises the device: warm a kernel up "
                                "before blocking a stream)")
                                   .c_str());
}

}  // namespace

void submit_launch(LaunchRequest request) {
  CUstream_st* stream = resolve_stream(request.stream);
  if (stream == nullptr) {
    record(cudaErrorInvalidResourceHandle);
    return;
  }
  const int device = stream_device(*stream);
  if (const cudaError_t sticky = sticky_error(device); sticky != cudaSuccess) {
    record(sticky);
    return;
  }
  if (const cudaError_t error = check_configuration(request); error != cudaSuccess) {
    record(error);
    return;
  }
  if (const std::string problem = bad_pointer(request); !problem.empty()) {
    raise_fault(device, cudaErrorIllegalAddress, problem);
    return;
  }
  load_kernel(device, request.kernel, std::string("kernel ") + request.kernel_name, !any_capture(device));
  auto launch = std::make_shared<GridLaunch>();
  launch->kernel = request.kernel_name;
  launch->grid = request.grid;
  launch->block = request.block;
  launch->dynamic_shared_bytes = request.shared_bytes;
  launch->run_thread = request.run_thread;
  launch->bound = request.bound.get();
  launch->seed = settings().seed;
  launch->launch_index = g_launches.fetch_add(1);
  if (dry_run()) {
    enqueue(*stream, [] {});  // checked and counted, not run (dry_run.h)
    return;
  }
  enqueue(*stream, [launch, bound = std::move(request.bound), device] { run_grid(*launch, device); });
}

}  // namespace lab::cuda::emu

// Only the dynamic shared memory limit is emulated; other attributes are accepted and change nothing.
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  using namespace lab::cuda::emu;
  if (func == nullptr) return record(cudaErrorInvalidDeviceFunction);
  if (const int device = current_device(); valid_device(device))
    load_kernel(device, func, "a kernel (cudaFuncSetAttribute)", !any_capture(device));
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > kMaxDynamicSharedOptIn) return record(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(g_attributes_mutex);
    g_max_dynamic_shared[func] = value;
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
    if (value < -1 || value > 100) return record(cudaErrorInvalidValue);
    return cudaSuccess;
  }
  return record(cudaErrorInvalidValue);
}
