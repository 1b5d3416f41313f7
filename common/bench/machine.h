// The machine a benchmark ran on, recorded with every result so that two results can be compared
// knowingly: CPU model and cores, memory, OS, compiler, build type, and the GPU where there is one.
//
// The GPU fields are filled by a describer: in a CUDA build, by default, the CUDA runtime's view of the
// GPUs (count, name of GPU 0, driver's CUDA version); set_gpu_describer() replaces it. Without CUDA they
// stay empty and gpu_count is 0.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace lab::bench {

struct MachineInfo {
  std::string hostname;
  std::string os;                     // "Linux 6.1.0-18-amd64 x86_64"
  std::string cpu_model;              // from /proc/cpuinfo
  int cpu_cores = 0;                  // logical CPUs this process may use
  int threads = 0;                    // OpenMP threads the CPU backend uses
  int64_t memory_bytes = 0;           // physical memory
  std::string compiler;               // "GCC 12.2.0"
  std::string build_type;             // "optimized" or "debug", from the compiler's own macros
  std::vector<std::string> features;  // backends and instruction sets compiled in: "blas", "mpi", "avx2", ...
  int gpu_count = 0;
  std::string gpu_name;
  std::string gpu_driver;
  int64_t gpu_memory_bytes = 0;

  Json to_json() const;
  // Error(Format) naming the missing or mistyped key.
  static MachineInfo from_json(const Json& json);
  // One line for titles and reports: "AMD EPYC (2 cores, 23.4 GiB), no GPU".
  std::string summary() const;
  bool operator==(const MachineInfo&) const = default;
};

// Describes this machine (and its GPUs, through the describer, when one is installed).
MachineInfo describe_machine();

// Installs the function that fills the gpu_* fields; the CUDA backend calls this. An empty function
// removes it.
void set_gpu_describer(std::function<void(MachineInfo&)> describer);

}  // namespace lab::bench
