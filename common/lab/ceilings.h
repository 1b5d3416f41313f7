// The ceilings a kernel is measured against: how many FLOP/s and bytes/s the device can deliver at most.
//
// A GPU's come from the datasheet tables of common/bench/gpu_peaks.h (its model's dense peak at the version's
// precision, and its DRAM bandwidth). A CPU has no table: its ceilings are measured in the same run, by the
// CPU reference's own sgemm on a square product and by a parallel memcpy, so a CPU version's "fraction of peak"
// is a fraction of what this machine, under its present load, really delivered. Measured as the kernels run:
//   - on all the threads OpenMP gives the kernels (one chunk of the copy per thread, each thread touching its
//     own chunk first, as a kernel's threads touch the outputs they write);
//   - over a copy that moves as many bytes as the kernel does, so that a kernel whose data sit in the caches
//     is compared with a copy whose data sit there too (a copy of 256 MiB from memory made cache-resident
//     kernels look 141-176% as fast as the machine);
//   - as the fastest of samples spread over the lab's run (kernel_lab.cpp takes them before each CPU version
//     and after the last): a loaded machine can only make a run slower, so one burst of load cannot lower
//     the ceiling alone (a median measured once under load made a kernel 262% as fast as the machine).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/bench/gpu_peaks.h"

namespace lab::kernel_lab {

struct Ceiling {
  std::string name;        // where the numbers come from: "H100 SXM fp32, H100 SXM (HBM3)", "measured: ..."
  double flops_per_s = 0;  // 0: unknown
  double bytes_per_s = 0;  // 0: unknown
};

// The datasheet ceiling of the GPU named `device_name` at `precision`; std::nullopt when the GPU is in neither
// table (an emulated GPU among them).
std::optional<Ceiling> gpu_ceiling(const std::string& device_name, bench::Precision precision);

// The rate a ceiling takes from timed runs of a fixed amount of work: `work_per_run` (FLOPs, bytes) over the
// fastest of `seconds`. Samples that are not positive are ignored; 0 (unknown) when none is left.
double best_rate(double work_per_run, std::span<const double> seconds);

// The CPU's ceilings, measured sample by sample between the timed runs of a lab's CPU versions: sgemm
// throughput at M = N = K = 1024 and the bandwidth of a parallel memcpy (bytes read plus bytes written).
class CpuCeilingMeter {
 public:
  // `working_bytes`: the kernel's bytes per run (read plus written); the copy moves as many, within
  // 64 KiB..256 MiB. 0: 256 MiB, larger than any CPU's last-level cache, so the copy streams from memory.
  // Touches the buffers and runs each measurement once untimed.
  explicit CpuCeilingMeter(double working_bytes = 0);

  // Times `count` sgemms and `count` copies, each after one untimed run of its own, as a kernel is timed after
  // its warm-up: the operands in the caches where they fit, the threads and the vector units awake (a cold
  // sgemm ran 10% slower than a warm one).
  void sample(int count = 1);
  int samples() const { return static_cast<int>(copy_seconds_.size()); }
  size_t copy_bytes() const { return bytes_; }  // one way: the copy reads this many bytes and writes as many
  // The ceilings of the samples so far (best_rate of each).
  Ceiling ceiling() const;

 private:
  void gemm();
  void copy();

  std::vector<float> a_, b_, c_;  // the sgemm's operands
  size_t bytes_ = 0;
  std::unique_ptr<char[]> from_, to_;
  int copies_per_timing_ = 1;  // small copies are repeated within a timing, so that it is long enough to time
  std::vector<double> gemm_seconds_, copy_seconds_;
};

// A CpuCeilingMeter sampled `samples` times in a row: the ceiling outside a lab. A few tenths of a second.
Ceiling measure_cpu_ceiling(double working_bytes = 0, int samples = 5);

}  // namespace lab::kernel_lab
