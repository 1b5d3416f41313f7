// Error checks for NCCL calls, like CUDA_CHECK: a failure becomes a lab::Error(Comm) that names the result,
// NCCL's own description of the last error, the statement and file:line:
//
//     NCCL error: ncclInvalidArgument (invalid argument) in `ncclAllReduce(...)` at
//     common/comm/nccl_communicator.cpp:120; NCCL says: AllReduce: invalid root 5 (root must be in [0, 4))
//
// The kind is Comm, not Cuda: a failed NCCL call leaves the ranks out of step, so the communicator that made
// it is broken (communicator.h). Built with LAB_WITH_NCCL only.
#pragma once

#include <nccl.h>

#include <string>

namespace lab::comm {

// "ncclInvalidArgument", "ncclRemoteError", ...: the enumerator's name, which ncclGetErrorString lacks.
const char* nccl_result_name(ncclResult_t result);

// A sentence for an NCCL result: "ncclRemoteError (remote process exited ...); NCCL says: ..." (the last
// part when NCCL has a message for it).
std::string nccl_result_text(ncclResult_t result);

[[noreturn]] void throw_nccl_error(ncclResult_t result, const char* statement, const char* file, int line);

}  // namespace lab::comm

#define NCCL_CHECK(statement)                                                          \
  do {                                                                                 \
    const ncclResult_t lab_nccl_result_ = (statement);                                 \
    if (lab_nccl_result_ != ncclSuccess)                                               \
      ::lab::comm::throw_nccl_error(lab_nccl_result_, #statement, __FILE__, __LINE__); \
  } while (0)
