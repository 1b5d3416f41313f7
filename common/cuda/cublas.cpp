#include "common/cuda/cublas.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

namespace lab::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what NVIDIA recommends for cuBLAS on Hopper

std::atomic<bool> g_tf32{false};

// The handles of one device for one thread. Destroyed when the thread ends (for the main thread, before
// static destructors and the CUDA runtime's own teardown); errors there cannot be reported and are ignored.
struct DeviceHandles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;

  DeviceHandles() = default;
  DeviceHandles(const DeviceHandles&) = delete;
  DeviceHandles& operator=(const DeviceHandles&) = delete;
  ~DeviceHandles() {
    if (blas) cublasDestroy(blas);
    if (lt) cublasLtDestroy(lt);
  }
};

thread_local std::vector<std::unique_ptr<DeviceHandles>> t_handles;

DeviceHandles& handles_of(int device) {
  if (t_handles.size() <= static_cast<size_t>(device)) t_handles.resize(static_cast<size_t>(device) + 1);
  auto& slot = t_handles[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<DeviceHandles>();
  return *slot;
}

// One workspace per (device, stream), shared by every thread: work on one stream runs in order, so GEMMs
// queued there by different threads never use it at the same time, while GEMMs of two streams may. A
// stream's workspace is freed when the stream is destroyed (release_stream_workspace), so there are as many
// as there are live streams that ran a GEMM. Never destroyed as a whole: a Storage freed during static
// destruction could outlive the caching allocator's users.
struct Workspaces {
  std::mutex mutex;
  std::map<std::pair<int, cudaStream_t>, std::unique_ptr<Storage>> by_stream;
};

Workspaces& workspaces() {
  static Workspaces* const all = new Workspaces;
  return *all;
}

BlasWorkspace workspace_of(int device, cudaStream_t stream) {
  Workspaces& all = workspaces();
  std::lock_guard<std::mutex> lock(all.mutex);
  auto& storage = all.by_stream[{device, stream}];
  if (!storage) {
    // Allocated while `stream` is current (it is the current stream), so the allocator reuses it on `stream`.
    storage = std::make_unique<Storage>(kWorkspaceBytes, Device::cuda(device), MemCategory::Workspace);
  }
  return {storage->data(), storage->bytes()};
}

}  // namespace

cublasHandle_t cublas_handle() {
  const int device = current_device();
  DeviceHandles& handles = handles_of(device);
  if (!handles.blas) CUBLAS_CHECK(cublasCreate(&handles.blas));
  const cudaStream_t stream = current_stream(device);
  const BlasWorkspace workspace = workspace_of(device, stream);
  // Setting the stream resets the workspace to cuBLAS's default pool, so the workspace comes second.
  CUBLAS_CHECK(cublasSetStream(handles.blas, stream));
  CUBLAS_CHECK(cublasSetWorkspace(handles.blas, workspace.data, workspace.bytes));
  CUBLAS_CHECK(cublasSetMathMode(handles.blas, tf32_enabled() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handles.blas;
}

cublasLtHandle_t cublaslt_handle() {
  DeviceHandles& handles = handles_of(current_device());
  if (!handles.lt) CUBLAS_CHECK(cublasLtCreate(&handles.lt));
  return handles.lt;
}

BlasWorkspace blas_workspace() {
  const int device = current_device();
  return workspace_of(device, current_stream(device));
}

void release_stream_workspace(int device, cudaStream_t stream) noexcept {
  std::unique_ptr<Storage> released;  // freed outside the lock: the allocator takes its own
  {
    Workspaces& all = workspaces();
    std::lock_guard<std::mutex> lock(all.mutex);
    const auto it = all.by_stream.find({device, stream});
    if (it == all.by_stream.end()) return;
    released = std::move(it->second);
    all.by_stream.erase(it);
  }
}

void set_tf32(bool enabled) {
  g_tf32.store(enabled);
}
bool tf32_enabled() {
  return g_tf32.load();
}

cublasComputeType_t fp32_compute_type() {
  return tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace lab::cuda
