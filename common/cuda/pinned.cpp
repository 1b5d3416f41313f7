#include "common/cuda/pinned.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "common/core/error.h"

namespace lab::cuda {

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  // Portable: pinned for every device of the process, not only the current one.
  const cudaError_t status = cudaHostAlloc(&data_, bytes, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    cudaGetLastError();
    data_ = nullptr;
    fail(ErrorKind::Cuda, "cannot pin ", bytes, " bytes of host memory: ", cudaGetErrorName(status), " (",
         cudaGetErrorString(status), ")");
  }
}

PinnedBuffer::~PinnedBuffer() {
  release();
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::release() noexcept {
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace lab::cuda
