// Datasheet ceilings for GPUs, measured ones for the CPU (see ceilings.h).
#include "common/lab/ceilings.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/bench/stats.h"
#include "common/bench/timer.h"
#include "common/core/error.h"
#include "common/core/parallel.h"
#include "common/ops/cpu/gemm.h"
#include "common/util/rng.h"

namespace lab::kernel_lab {

std::optional<Ceiling> gpu_ceiling(const std::string& device_name, bench::Precision precision) {
  const std::optional<bench::GpuPeak> flops = bench::gpu_peak_flops(device_name, precision);
  const std::optional<bench::GpuBandwidth> bandwidth = bench::gpu_peak_bandwidth(device_name);
  if (!flops && !bandwidth) return std::nullopt;
  Ceiling ceiling;
  ceiling.name = cat(flops ? cat(flops->entry, " ", bench::precision_name(precision)) : "FLOP/s unknown", ", ",
                     bandwidth ? bandwidth->entry : "bandwidth unknown");
  if (flops) ceiling.flops_per_s = flops->flops;
  if (bandwidth) ceiling.bytes_per_s = bandwidth->bytes_per_s;
  return ceiling;
}

Ceiling measure_cpu_ceiling() {
  constexpr int kRepeats = 5;
  constexpr int64_t n = 1024;
  Rng rng(7);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (float& x : a) x = rng.normal();
  for (float& x : b) x = rng.normal();
  const double gemm_s = bench::median(bench::measure(
      [&] { ops::cpu::sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); }, 1, kRepeats));

  // Larger than any CPU's last-level cache, so the copy streams from and to memory.
  const size_t bytes = size_t{256} << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  // One contiguous chunk per thread: one core alone rarely saturates the memory controllers.
  const auto parallel_copy = [&] {
    const int64_t chunks = num_threads();
    const int64_t chunk = static_cast<int64_t>(bytes) / chunks + 1;
#pragma omp parallel for
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t begin = i * chunk, end = std::min<int64_t>(static_cast<int64_t>(bytes), begin + chunk);
      if (begin < end) std::memcpy(to.data() + begin, from.data() + begin, static_cast<size_t>(end - begin));
    }
  };
  const double copy_s = bench::median(bench::measure(parallel_copy, 1, kRepeats));

  Ceiling ceiling;
  ceiling.flops_per_s = 2.0 * n * n * n / gemm_s;
  ceiling.bytes_per_s = 2.0 * static_cast<double>(bytes) / copy_s;
  ceiling.name = cat("measured: sgemm 1024^3 (", ops::cpu::gemm_uses_blas() ? "OpenBLAS" : "portable loops", ") ",
                     static_cast<int64_t>(ceiling.flops_per_s / 1e9), " GFLOP/s, memcpy 256 MiB ",
                     static_cast<int64_t>(ceiling.bytes_per_s / 1e9), " GB/s");
  return ceiling;
}

}  // namespace lab::kernel_lab
