// The emulated devices' state: which device each host thread has current, each thread's last error, and
// each device's sticky fault (an error that every later call returns until cudaDeviceReset, as after a
// fault on a GPU).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace lab::cuda::emu {

int device_count();
bool valid_device(int device);
int current_device();  // of the calling thread (0 until cudaSetDevice)
void set_current_device(int device);

// Records `error` as the calling thread's last error unless it is cudaSuccess or cudaErrorNotReady (an
// answer, not an error, as in the real runtime), and returns it.
cudaError_t record(cudaError_t error);

// The calling thread's last error; take_last_error also clears it. A sticky fault of the current device
// is returned instead, and stays.
cudaError_t take_last_error();
cudaError_t peek_last_error();

// The sticky error of `device` (cudaSuccess when it has not faulted).
cudaError_t sticky_error(int device);

// Makes `code` the sticky error of `device`, keeps `message` for last_fault() and prints it to stderr.
// The first fault wins, as on a GPU; later ones are only printed.
void raise_fault(int device, cudaError_t code, const std::string& message);

// cudaDeviceReset's part: forgets the fault of `device`.
void clear_fault(int device);

// The properties of an emulated H100 SXM (compute capability 9.0, 132 SMs, the sm_90 launch limits).
const cudaDeviceProp& device_properties(int device);

}  // namespace lab::cuda::emu
