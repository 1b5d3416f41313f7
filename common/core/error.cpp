#include "common/core/error.h"

namespace lab {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::Io: return "I/O error";
    case ErrorKind::Format: return "format error";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::Cuda: return "CUDA error";
    case ErrorKind::Comm: return "communication error";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

}  // namespace lab
