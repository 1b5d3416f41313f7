// The stand-in's communicator state and its error reporting.
#include "common/cuda/emulation/nccl/state.h"

#include <cstddef>

namespace lab::cuda::emu::nccl {

namespace {

// The message of the last error, for ncclGetLastError (one per process, as in NCCL).
std::mutex g_last_error_mutex;
std::string g_last_error;

}  // namespace

CommState::CommState(MPI_Comm data_comm, int device_index) : data(data_comm), device(device_index) {
  MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  MPI_Comm_rank(data, &rank);
  MPI_Comm_size(data, &size);
  MPI_Comm_dup(data, &control);
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
}

CommState::~CommState() {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&control);
  if (!abandoned) MPI_Comm_free(&data);
}

std::string mpi_error_text(int code) {
  char description[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, description, &length) != MPI_SUCCESS) return text("MPI error code ", code);
  return std::string(description, static_cast<size_t>(length));
}

std::string last_error() {
  std::lock_guard<std::mutex> lock(g_last_error_mutex);
  return g_last_error;
}

ncclResult_t fail(ncclResult_t result, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_last_error_mutex);
  g_last_error = message;
  return result;
}

void record_async_error(CommState& comm, ncclResult_t error, const std::string& message) {
  fail(error, message);
  std::lock_guard<std::mutex> lock(comm.mutex);
  if (comm.async_error == ncclSuccess) comm.async_error = error;
}

}  // namespace lab::cuda::emu::nccl

// ---------------------------------------------------------------- the error and version calls

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return lab::cuda::emu::nccl::fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

// NCCL's descriptions, without its advice to set NCCL_DEBUG (the stand-in reads no NCCL variables; its
// message is in ncclGetLastError).
const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;  // stays valid for the caller after the lock is released
  copy = lab::cuda::emu::nccl::last_error();
  return copy.c_str();
}
