// Datasheet ceilings for GPUs, measured ones for the CPU (see ceilings.h).
#include "common/lab/ceilings.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

Ceiling measure_cpu_ceiling(double working_bytes) {
  constexpr int kRepeats = 5;
  constexpr int64_t n = 1024;
  Rng rng(7);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (float& x : a) x = rng.normal();
  for (float& x : b) x = rng.normal();
  // The fastest of the repeats: a loaded machine can only make a run slower, and a ceiling measured low makes
  // the kernels look faster than the machine (over 100% of it).
  const double gemm_s =
      bench::summarize(
          bench::measure(
              [&] { ops::cpu::sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); }, 1,
              kRepeats))
          .min;

  // A copy that moves as many bytes as the kernel (read plus written), so that a kernel whose data sit in the
  // caches compares with a copy whose data sit there too; without a working set, one larger than any CPU's
  // last-level cache, so the copy streams from and to memory.
  constexpr size_t kMemoryBytes = size_t{256} << 20, kSmallest = size_t{64} << 10;
  const size_t bytes =
      working_bytes > 0 ? std::clamp(static_cast<size_t>(working_bytes / 2), kSmallest, kMemoryBytes) : kMemoryBytes;
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
  // Small copies repeat more, so each timing is long enough for the clock.
  const int runs_per_timing = static_cast<int>(std::max<size_t>(1, (size_t{16} << 20) / bytes));
  const double copy_s = bench::summarize(bench::measure(
                                             [&] {
                                               for (int r = 0; r < runs_per_timing; ++r) parallel_copy();
                                             },
                                             1, kRepeats))
                            .min /
                        runs_per_timing;

  Ceiling ceiling;
  ceiling.flops_per_s = 2.0 * n * n * n / gemm_s;
  ceiling.bytes_per_s = 2.0 * static_cast<double>(bytes) / copy_s;
  ceiling.name = cat("measured, best of ", kRepeats, ": sgemm 1024^3 (",
                     ops::cpu::gemm_uses_blas() ? "OpenBLAS" : "portable loops", ") ",
                     static_cast<int64_t>(ceiling.flops_per_s / 1e9), " GFLOP/s, memcpy ", bytes >> 10, " KiB ",
                     static_cast<int64_t>(ceiling.bytes_per_s / 1e9), " GB/s");
  return ceiling;
}

}  // namespace lab::kernel_lab
