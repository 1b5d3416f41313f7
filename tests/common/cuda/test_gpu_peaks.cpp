// The table of GPU peak FLOP/s: device names as drivers report them map to the right entry and
// precision; unknown GPUs and missing precisions give no number at all. Plain C++: runs on every machine.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "common/bench/gpu_peaks.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

void expect_peak(const std::string& device, Precision precision, const std::string& entry, double tflops) {
  const std::optional<GpuPeak> peak = gpu_peak_flops(device, precision);
  ASSERT_TRUE(peak.has_value()) << device << " " << precision_name(precision);
  EXPECT_EQ(peak->entry, entry) << device;
  EXPECT_DOUBLE_EQ(peak->flops, tflops * 1e12) << device << " " << precision_name(precision);
}

TEST(GpuPeaks, MatchesDriverNamesToDatasheetPeaks) {
  expect_peak("NVIDIA H100 80GB HBM3", Precision::BF16, "H100 SXM", 989.4);
  expect_peak("NVIDIA H100 80GB HBM3", Precision::TF32, "H100 SXM", 494.7);
  expect_peak("NVIDIA H100 80GB HBM3", Precision::FP32, "H100 SXM", 67.0);
  expect_peak("NVIDIA H100 PCIe", Precision::TF32, "H100 PCIe", 378.0);
  expect_peak("NVIDIA H100 NVL", Precision::FP16, "H100 NVL", 835.5);
  expect_peak("NVIDIA H200", Precision::BF16, "H200 SXM", 989.4);
  expect_peak("NVIDIA H200 NVL", Precision::BF16, "H200 NVL", 835.5);
  expect_peak("NVIDIA GH200 480GB", Precision::TF32, "GH200", 494.7);
  expect_peak("NVIDIA A100-SXM4-80GB", Precision::TF32, "A100 SXM", 156.0);
  expect_peak("NVIDIA A100-PCIE-40GB", Precision::BF16, "A100 PCIe", 312.0);
  expect_peak("NVIDIA A100 80GB PCIe", Precision::FP32, "A100 PCIe", 19.5);
  expect_peak("NVIDIA A10", Precision::TF32, "A10", 62.5);
  expect_peak("NVIDIA L4", Precision::BF16, "L4", 121.0);
  expect_peak("NVIDIA L40S", Precision::BF16, "L40S", 362.05);
  expect_peak("NVIDIA L40", Precision::BF16, "L40", 181.0);
  expect_peak("NVIDIA GeForce RTX 4090", Precision::TF32, "RTX 4090", 82.6);
  expect_peak("Tesla V100-SXM2-16GB", Precision::FP16, "V100 SXM2", 125.0);
}

TEST(GpuPeaks, UnknownGpusAndMissingPrecisionsGiveNothing) {
  for (const char* name : {"NVIDIA A10G", "NVIDIA H100", "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 3090 Ti",
                           "Tesla V100S-PCIE-32GB", "AMD Instinct MI300X", "", "cpu"})
    EXPECT_FALSE(gpu_peak_flops(name, Precision::BF16).has_value()) << "'" << name << "'";
  EXPECT_FALSE(gpu_peak_flops("Tesla V100-SXM2-16GB", Precision::BF16).has_value()) << "V100 has no bf16";
  EXPECT_FALSE(gpu_peak_flops("Tesla V100-SXM2-16GB", Precision::TF32).has_value()) << "V100 has no tf32";
}

TEST(GpuPeaks, BandwidthDependsOnTheMemoryFitted) {
  auto bandwidth = [](const char* name) {
    const std::optional<GpuBandwidth> b = gpu_peak_bandwidth(name);
    return b ? b->bytes_per_s / 1e9 : -1.0;
  };
  EXPECT_DOUBLE_EQ(bandwidth("NVIDIA H100 80GB HBM3"), 3350.0);
  EXPECT_EQ(gpu_peak_bandwidth("NVIDIA H100 80GB HBM3")->entry, "H100 SXM (HBM3)");
  EXPECT_DOUBLE_EQ(bandwidth("NVIDIA H100 PCIe"), 2000.0);
  EXPECT_DOUBLE_EQ(bandwidth("NVIDIA H200"), 4800.0);
  EXPECT_DOUBLE_EQ(bandwidth("NVIDIA A100-SXM4-40GB"), 1555.0);
  EXPECT_DOUBLE_EQ(bandwidth("NVIDIA A100-SXM4-80GB"), 2039.0);
  EXPECT_DOUBLE_EQ(bandwidth("NVIDIA A100 80GB PCIe"), 1935.0);
  EXPECT_DOUBLE_EQ(bandwidth("Tesla V100-SXM2-16GB"), 900.0);
  for (const char* name : {"NVIDIA GH200 480GB", "NVIDIA H100", "NVIDIA A10G", "AMD Instinct MI300X", ""})
    EXPECT_FALSE(gpu_peak_bandwidth(name).has_value()) << "'" << name << "'";
}

TEST(GpuPeaks, PrecisionNamesRoundTrip) {
  for (const Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
    EXPECT_EQ(parse_precision(precision_name(p)), p);
  testing::expect_error([] { parse_precision("fp8"); }, ErrorKind::InvalidArgument, {"fp8", "fp32"});
}

}  // namespace
}  // namespace lab::bench
