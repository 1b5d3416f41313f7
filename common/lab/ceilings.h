// The ceilings a kernel is measured against: how many FLOP/s and bytes/s the device can deliver at most.
//
// A GPU's come from the datasheet tables of common/bench/gpu_peaks.h (its model's dense peak at the version's
// precision, and its DRAM bandwidth). A CPU has no table: its ceilings are measured in the same run, by the
// CPU reference's own sgemm on a square product and by a large memcpy, so a CPU version's "fraction of peak"
// is a fraction of what this machine, under its present load, really delivered.
#pragma once

#include <optional>
#include <string>

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

// Measures this CPU: sgemm throughput at M = N = K = 1024 and memcpy bandwidth (bytes read plus bytes written,
// one chunk per thread) over a copy that moves `working_bytes`, the kernel's bytes per run (so that a working
// set that fits in the caches is compared with a copy in the caches), or over 256 MiB when it is 0; each the
// fastest of 5 runs on the CPU backend's threads. Takes a few tenths of a second.
Ceiling measure_cpu_ceiling(double working_bytes = 0);

}  // namespace lab::kernel_lab
