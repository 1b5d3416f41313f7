// Datasheet ceilings for GPUs, measured ones for the CPU (see ceilings.h).
#include "common/lab/ceilings.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "common/bench/timer.h"
#include "common/core/error.h"
#include "common/core/parallel.h"
#include "common/ops/cpu/gemm.h"
#include "common/util/rng.h"

namespace lab::kernel_lab {

namespace {

constexpr int64_t kGemmSize = 1024;  // M = N = K
constexpr size_t kMemoryBytes = size_t{256} << 20, kSmallestCopy = size_t{64} << 10;
constexpr size_t kBytesPerTiming = size_t{16} << 20;  // at least this much copied per timing

// Runs `chunk_work(begin, end)` on one contiguous chunk of [0, bytes) per OpenMP thread, the same chunk on
// the same thread every call: one core alone rarely saturates the memory controllers, and a thread that
// first touched its chunk finds its pages on its own NUMA node.
template <typename ChunkWork>
void for_each_chunk(size_t bytes, const ChunkWork& chunk_work) {
  const int64_t chunks = num_threads();
  const int64_t chunk = static_cast<int64_t>(bytes) / chunks + 1;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t begin = i * chunk, end = std::min<int64_t>(static_cast<int64_t>(bytes), begin + chunk);
    if (begin < end) chunk_work(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
  }
}

}  // namespace

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

double best_rate(double work_per_run, std::span<const double> seconds) {
  double fastest = 0;
  for (const double s : seconds)
    if (s > 0 && (fastest == 0 || s < fastest)) fastest = s;
  return fastest > 0 ? work_per_run / fastest : 0;
}

CpuCeilingMeter::CpuCeilingMeter(double working_bytes)
    : a_(static_cast<size_t>(kGemmSize * kGemmSize)),
      b_(a_.size()),
      c_(a_.size()),
      bytes_(working_bytes > 0 ? std::clamp(static_cast<size_t>(working_bytes / 2), kSmallestCopy, kMemoryBytes)
                               : kMemoryBytes),
      from_(std::make_unique_for_overwrite<char[]>(bytes_)),  // first touched below, by the copying threads
      to_(std::make_unique_for_overwrite<char[]>(bytes_)),
      copies_per_timing_(static_cast<int>(std::max<size_t>(1, kBytesPerTiming / bytes_))) {
  Rng rng(7);
  for (float& x : a_) x = rng.normal();
  for (float& x : b_) x = rng.normal();
  for_each_chunk(bytes_, [&](size_t begin, size_t n) {
    std::memset(from_.get() + begin, 1, n);
    std::memset(to_.get() + begin, 0, n);
  });
  gemm();  // the BLAS threads started, the buffers in the caches they will be timed from
  copy();
}

void CpuCeilingMeter::gemm() {
  ops::cpu::sgemm(false, false, kGemmSize, kGemmSize, kGemmSize, 1.0f, a_.data(), kGemmSize, b_.data(), kGemmSize, 0.0f,
                  c_.data(), kGemmSize);
}

void CpuCeilingMeter::copy() {
  for_each_chunk(bytes_, [&](size_t begin, size_t n) { std::memcpy(to_.get() + begin, from_.get() + begin, n); });
}

void CpuCeilingMeter::sample(int count) {
  for (int i = 0; i < count; ++i) {
    gemm();
    bench::Timer timer;
    gemm();
    gemm_seconds_.push_back(timer.seconds());
    copy();
    timer.restart();
    for (int r = 0; r < copies_per_timing_; ++r) copy();
    copy_seconds_.push_back(timer.seconds() / copies_per_timing_);
  }
}

Ceiling CpuCeilingMeter::ceiling() const {
  Ceiling ceiling;
  ceiling.flops_per_s = best_rate(2.0 * kGemmSize * kGemmSize * kGemmSize, gemm_seconds_);
  ceiling.bytes_per_s = best_rate(2.0 * static_cast<double>(bytes_), copy_seconds_);
  ceiling.name = cat("measured, best of ", samples(), ": sgemm 1024^3 (",
                     ops::cpu::gemm_uses_blas() ? "OpenBLAS" : "portable loops", ") ",
                     static_cast<int64_t>(ceiling.flops_per_s / 1e9), " GFLOP/s, memcpy ", bytes_ >> 10, " KiB on ",
                     num_threads(), " threads ", static_cast<int64_t>(ceiling.bytes_per_s / 1e9), " GB/s");
  return ceiling;
}

Ceiling measure_cpu_ceiling(double working_bytes, int samples) {
  LAB_CHECK(samples >= 1, InvalidArgument, "measure_cpu_ceiling: samples must be >= 1, got ", samples);
  CpuCeilingMeter meter(working_bytes);
  meter.sample(samples);
  return meter.ceiling();
}

}  // namespace lab::kernel_lab
