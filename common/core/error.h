// Errors: one typed exception for everything that can go wrong, carrying what failed and where.
//
// Executables catch `lab::Error` (and std::exception) at main() and print one line; tests assert on the
// kind and on the message. LAB_CHECK is for conditions that depend on input (files, flags, shapes):
// it throws, it never aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace lab {

enum class ErrorKind {
  InvalidArgument,  // bad flag, bad shape, out-of-range value
  Io,               // a file could not be opened, read or written
  Format,           // a file exists but its contents are wrong (truncated, corrupt, wrong magic)
  Unsupported,      // valid request this build or device cannot do (e.g. CUDA tensor in a CPU-only build)
  Cuda,             // a CUDA / cuBLAS / NCCL call failed
  Comm,             // a collective failed or timed out
  Internal,         // a broken invariant inside the library
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Concatenates anything streamable: cat("expected ", 3, " dims, found ", 2).
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

// Throws Error(kind, message).
template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, Args&&... args) {
  throw Error(kind, cat(std::forward<Args>(args)...));
}

}  // namespace lab

// LAB_CHECK(cond, kind, message parts...): throw Error(kind, "...") when cond is false.
#define LAB_CHECK(cond, kind, ...)                                 \
  do {                                                             \
    if (!(cond)) ::lab::fail(::lab::ErrorKind::kind, __VA_ARGS__); \
  } while (0)

// LAB_ASSERT(cond): an internal invariant; reports the statement and file:line.
#define LAB_ASSERT(cond)                                                                                          \
  do {                                                                                                            \
    if (!(cond))                                                                                                  \
      ::lab::fail(::lab::ErrorKind::Internal, "internal check failed: ", #cond, " at ", __FILE__, ":", __LINE__); \
  } while (0)
