// Where a step's time goes, without a profiler: the ops and kernels it runs, counted and timed
// (`gpt2_step_bench --profile`, `gpt2_train --profile N`).
//
// While a StepProfile is open (one at a time in a process), two kinds of record arrive:
//   op      every op of common/ops as it is dispatched (LAB_DISPATCH, ops/dispatch.h): the host's time around the
//           call. On the CPU that is the op's time. On a GPU it is only what the launch costs the host: the work
//           itself runs later on the stream (the kernel rows say how long).
//   kernel  every CUDA kernel launch (LAB_LAUNCH) and cuBLAS call of the CUDA backend, timed on the device by a
//           pair of CUDA events around it, read when the profile closes (common/cuda/kernel_timing.h). Under
//           the emulator the events time the emulated kernels on the host.
// Counts are exact on every backend, so the list of ops and the number of launches per step can be tested
// without a GPU; times are for reading, never for tests. Zero-fills (Tensor::zero_ and Tensor::zeros, on any device)
// are counted apart, with their bytes: memory traffic that is no op's work (cudaMemsetAsync on CUDA, no kernel of
// ours), most of it gradients starting at zero, which a step can often do without (ops::GradWrite).
//
// Every op also pushes an NVTX range named after it (through the GPU backend, so in a CUDA build only), whether a
// profile is open or not, so that Nsight Systems shows the step's structure by name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace lab {

enum class ProfileKind { Op, Kernel };

struct ZeroFills {
  int64_t count = 0, bytes = 0;
  // "N zero-fills, X MB": the line the profile's readers print under its tables.
  std::string line() const;
};

struct ProfileRow {
  std::string name;
  int64_t calls = 0;
  double seconds = 0;
};

class StepProfile {
 public:
  // Opens the profile; Error(InvalidArgument) when another one is open.
  StepProfile();
  ~StepProfile();
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  // The open profile, or null.
  static StepProfile* open_profile();

  // One call of `name` (a string that outlives the profile: a literal) taking `seconds`. Thread-safe.
  void add(ProfileKind kind, const char* name, double seconds);
  // One zero-fill of `bytes`. Thread-safe.
  void add_zero_fill(int64_t bytes);
  ZeroFills zero_fills() const;
  // `finish` runs once, at close(), before the rows are final (the CUDA backend reads its events there).
  void at_close(std::function<void(StepProfile&)> finish);
  // Stops recording and runs the finishers; later calls do nothing.
  void close();

  // The rows of one kind, by total time (then calls, then name), largest first.
  std::vector<ProfileRow> rows(ProfileKind kind) const;
  int64_t calls(ProfileKind kind) const;
  // A table like PyTorch's profiler: name, calls, total ms, share of the kind's total, mean us per call.
  std::string table(ProfileKind kind) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<ProfileKind, std::string>, ProfileRow> rows_;
  ZeroFills zero_fills_;
  std::vector<std::function<void(StepProfile&)>> finishers_;
  bool closed_ = false;
};

// Times one op call for the open profile (if any) and names it in an NVTX range. LAB_DISPATCH puts one around
// every op; `name` must be a literal.
class ProfiledOp {
 public:
  explicit ProfiledOp(const char* name);
  ~ProfiledOp();
  ProfiledOp(const ProfiledOp&) = delete;
  ProfiledOp& operator=(const ProfiledOp&) = delete;

 private:
  const char* name_;
  StepProfile* profile_;
  int64_t start_ns_ = 0;
};

}  // namespace lab
