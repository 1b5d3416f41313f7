// NCCL results as lab::Errors.
#include "common/comm/nccl_check.h"

#include <string>

#include "common/core/error.h"

namespace lab::comm {

const char* nccl_result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "an unknown ncclResult_t";
  }
}

namespace {

// NCCL keeps the message of the last error it detected (for any communicator: the argument is unused).
std::string what_nccl_says() {
  const char* last = ncclGetLastError(nullptr);
  return last != nullptr && last[0] != '\0' ? cat("; NCCL says: ", last) : std::string();
}

}  // namespace

std::string nccl_result_text(ncclResult_t result) {
  return cat(nccl_result_name(result), " (", ncclGetErrorString(result), ")", what_nccl_says());
}

void throw_nccl_error(ncclResult_t result, const char* statement, const char* file, int line) {
  fail(ErrorKind::Comm, "NCCL error: ", nccl_result_name(result), " (", ncclGetErrorString(result), ") in `", statement,
       "` at ", file, ":", line, what_nccl_says());
}

}  // namespace lab::comm
