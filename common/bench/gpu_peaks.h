// Dense peak FLOP/s of GPU models, per precision, for model-FLOPs utilisation (MFU), and their memory
// bandwidth, for the fraction of peak of memory-bound kernels.
//
// MFU = achieved model FLOP/s / the GPU's peak, so the peak must be the right one: the dense (no 2:4
// sparsity) tensor-core figure of the precision the GEMMs really run in, from the vendor's datasheet,
// and plain fp32 (no tensor cores) for strict fp32. The device name the driver reports (for example
// "NVIDIA H100 80GB HBM3" or "NVIDIA A100-SXM4-40GB") is matched against a small table; a GPU that is
// not in it, or a precision it lacks, gives std::nullopt, and callers print "unknown GPU: peak not
// known" rather than guess. The entry's name is returned with the number so callers can print which
// peak they divided by.
//
// The bandwidth is the datasheet's DRAM (HBM or GDDR) bandwidth, which depends on the memory fitted as well as
// on the model (an A100 with 40 GB has 1555 GB/s, with 80 GB 2039 GB/s), so it has a table of its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lab::bench {

enum class Precision { FP32, TF32, BF16, FP16 };
const char* precision_name(Precision precision);   // "fp32", "tf32", "bf16", "fp16"
Precision parse_precision(std::string_view name);  // Error(InvalidArgument) for anything else

struct GpuPeak {
  std::string entry;   // the table entry that matched, e.g. "H100 SXM"
  double flops = 0.0;  // dense peak, FLOP/s
};

// The peak of the GPU named `device_name` at `precision`, or std::nullopt when the GPU is not in the
// table or has no such math (e.g. bf16 on a V100).
std::optional<GpuPeak> gpu_peak_flops(std::string_view device_name, Precision precision);

struct GpuBandwidth {
  std::string entry;         // the table entry that matched, e.g. "H100 SXM (HBM3)"
  double bytes_per_s = 0.0;  // DRAM bandwidth, bytes/s
};

// The memory bandwidth of the GPU named `device_name`, or std::nullopt when it is not in the table.
std::optional<GpuBandwidth> gpu_peak_bandwidth(std::string_view device_name);

}  // namespace lab::bench
