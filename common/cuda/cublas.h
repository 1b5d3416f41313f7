// cuBLAS and cuBLASLt handles: one per device and thread, created on first use.
//
// cublas_handle() returns the handle of the current device, bound to the thread's current stream (see
// stream.h) with that stream's workspace (kernels of two streams must not share scratch memory), in the math
// mode chosen by set_tf32(). cuBLASLt takes its stream and workspace per call:
// pass current_stream() and blas_workspace().
//
// TF32: with set_tf32(true), fp32 GEMMs run on the tensor cores with inputs rounded to TF32 (10 mantissa
// bits, fp32 range and accumulation): several times faster on Ampere and later, with a relative error
// around 1e-3 instead of 1e-6. The default is strict fp32. The switch is process-wide and applies to
// every GEMM issued after it.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>

namespace lab::cuda {

cublasHandle_t cublas_handle();
cublasLtHandle_t cublaslt_handle();

// Scratch memory for cuBLAS / cuBLASLt on the current stream of the current device: 32 MiB from the caching
// allocator under MemCategory::Workspace, one per device and stream, shared by all threads (a stream runs its
// GEMMs one after another), freed when the stream is destroyed.
struct BlasWorkspace {
  void* data;
  size_t bytes;
};
BlasWorkspace blas_workspace();

// Called by Stream's destructor once the stream's work has finished: frees the stream's workspace.
void release_stream_workspace(int device, cudaStream_t stream) noexcept;

void set_tf32(bool enabled);
bool tf32_enabled();

// The compute type of an fp32 cuBLASLt matmul under the current switch: CUBLAS_COMPUTE_32F, or
// CUBLAS_COMPUTE_32F_FAST_TF32 when TF32 is enabled.
cublasComputeType_t fp32_compute_type();

}  // namespace lab::cuda
