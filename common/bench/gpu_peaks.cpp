#include "common/bench/gpu_peaks.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "common/core/error.h"

namespace lab::bench {

namespace {

// Dense peaks in TFLOP/s from NVIDIA's datasheets and architecture whitepapers (the figures marked
// "with sparsity" halved); 0 where the GPU has no such math. bf16/fp16 are with fp32 accumulation,
// which is what training uses (GeForce cards run fp16 accumulation at twice that rate).
struct Entry {
  const char* name;
  std::vector<std::string> all_of;   // tokens the device name must contain (a trailing * matches a prefix)
  std::vector<std::string> none_of;  // tokens it must not contain
  double fp32, tf32, bf16, fp16;
};

const std::vector<Entry>& table() {
  // Order matters: the first entry that matches wins, so variants come before their base model.
  static const std::vector<Entry> entries = {
      {"H100 NVL", {"H100", "NVL"}, {}, 60.0, 417.5, 835.5, 835.5},
      {"H100 PCIe", {"H100", "PCIE"}, {}, 51.2, 378.0, 756.0, 756.0},
      {"H100 SXM", {"H100", "SXM*"}, {}, 67.0, 494.7, 989.4, 989.4},
      {"H100 SXM", {"H100", "HBM3"}, {}, 67.0, 494.7, 989.4, 989.4},  // "NVIDIA H100 80GB HBM3" is the SXM5 part
      {"H200 NVL", {"H200", "NVL"}, {}, 60.0, 417.5, 835.5, 835.5},
      {"H200 SXM", {"H200"}, {}, 67.0, 494.7, 989.4, 989.4},
      {"GH200", {"GH200"}, {}, 67.0, 494.7, 989.4, 989.4},
      {"A100 SXM", {"A100", "SXM*"}, {}, 19.5, 156.0, 312.0, 312.0},
      {"A100 PCIe", {"A100", "PCIE"}, {}, 19.5, 156.0, 312.0, 312.0},
      {"A10", {"A10"}, {}, 31.2, 62.5, 125.0, 125.0},
      {"L40S", {"L40S"}, {}, 91.6, 183.0, 362.05, 362.05},
      {"L40", {"L40"}, {}, 90.5, 90.5, 181.0, 181.0},
      {"L4", {"L4"}, {}, 30.3, 60.0, 121.0, 121.0},
      {"RTX 4090", {"RTX", "4090"}, {"D", "LAPTOP"}, 82.6, 82.6, 165.2, 165.2},
      {"RTX 3090", {"RTX", "3090"}, {"TI", "LAPTOP"}, 35.6, 35.6, 71.0, 71.0},
      {"V100 SXM2", {"V100", "SXM2*"}, {}, 15.7, 0.0, 0.0, 125.0},
      {"V100 PCIe", {"V100", "PCIE*"}, {}, 14.0, 0.0, 0.0, 112.0},
  };
  return entries;
}

// DRAM bandwidth in GB/s from the same datasheets. Entries are matched as above; a model sold with different
// memories has one entry per memory (the GH200 too, whose HBM3 and HBM3e parts report the same name, is left
// out rather than guessed).
struct BandwidthEntry {
  const char* name;
  std::vector<std::string> all_of;
  std::vector<std::string> none_of;
  double gb_per_s;
};

const std::vector<BandwidthEntry>& bandwidth_table() {
  static const std::vector<BandwidthEntry> entries = {
      {"H100 NVL", {"H100", "NVL"}, {}, 3900.0},
      {"H100 PCIe", {"H100", "PCIE"}, {}, 2000.0},
      {"H100 SXM (HBM3)", {"H100", "SXM*"}, {}, 3350.0},
      {"H100 SXM (HBM3)", {"H100", "HBM3"}, {}, 3350.0},
      {"H200 NVL", {"H200", "NVL"}, {}, 4800.0},
      {"H200 SXM", {"H200"}, {}, 4800.0},
      {"A100 SXM 80GB", {"A100", "SXM*", "80GB"}, {}, 2039.0},
      {"A100 SXM 40GB", {"A100", "SXM*", "40GB"}, {}, 1555.0},
      {"A100 PCIe 80GB", {"A100", "PCIE", "80GB"}, {}, 1935.0},
      {"A100 PCIe 40GB", {"A100", "PCIE", "40GB"}, {}, 1555.0},
      {"A10", {"A10"}, {}, 600.0},
      {"L40S", {"L40S"}, {}, 864.0},
      {"L40", {"L40"}, {}, 864.0},
      {"L4", {"L4"}, {}, 300.0},
      {"RTX 4090", {"RTX", "4090"}, {"D", "LAPTOP"}, 1008.0},
      {"RTX 3090", {"RTX", "3090"}, {"TI", "LAPTOP"}, 936.0},
      {"V100 SXM2", {"V100", "SXM2*"}, {}, 900.0},
      {"V100 PCIe", {"V100", "PCIE*"}, {}, 900.0},
  };
  return entries;
}

// "NVIDIA A100-SXM4-40GB" -> {"NVIDIA", "A100", "SXM4", "40GB"}: upper case, split at anything that is
// not a letter or a digit, so "A10" never matches inside "A100" or "A10G".
std::vector<std::string> tokens_of(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  for (const char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      current += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

bool has_token(const std::vector<std::string>& tokens, const std::string& pattern) {
  const bool prefix = !pattern.empty() && pattern.back() == '*';
  const std::string_view want = prefix ? std::string_view(pattern).substr(0, pattern.size() - 1) : pattern;
  return std::any_of(tokens.begin(), tokens.end(),
                     [&](const std::string& t) { return prefix ? t.starts_with(want) : t == want; });
}

template <typename TableEntry>
bool matches(const TableEntry& e, const std::vector<std::string>& tokens) {
  for (const std::string& p : e.all_of)
    if (!has_token(tokens, p)) return false;
  for (const std::string& p : e.none_of)
    if (has_token(tokens, p)) return false;
  return true;
}

double tflops_of(const Entry& e, Precision precision) {
  switch (precision) {
    case Precision::FP32: return e.fp32;
    case Precision::TF32: return e.tf32;
    case Precision::BF16: return e.bf16;
    case Precision::FP16: return e.fp16;
  }
  return 0.0;
}

}  // namespace

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
  }
  return "?";
}

Precision parse_precision(std::string_view name) {
  for (const Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
    if (name == precision_name(p)) return p;
  fail(ErrorKind::InvalidArgument, "unknown precision '", name, "' (expected fp32, tf32, bf16 or fp16)");
}

std::optional<GpuPeak> gpu_peak_flops(std::string_view device_name, Precision precision) {
  const std::vector<std::string> tokens = tokens_of(device_name);
  for (const Entry& e : table()) {
    if (!matches(e, tokens)) continue;
    const double tflops = tflops_of(e, precision);
    if (tflops <= 0.0) return std::nullopt;
    return GpuPeak{e.name, tflops * 1e12};
  }
  return std::nullopt;
}

std::optional<GpuBandwidth> gpu_peak_bandwidth(std::string_view device_name) {
  const std::vector<std::string> tokens = tokens_of(device_name);
  for (const BandwidthEntry& e : bandwidth_table())
    if (matches(e, tokens)) return GpuBandwidth{e.name, e.gb_per_s * 1e9};
  return std::nullopt;
}

}  // namespace lab::bench
