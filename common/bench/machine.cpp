// Reads the machine description from the system (/proc, uname, sysconf) and the compiler's macros.
#include "common/bench/machine.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <thread>

#include "common/core/device.h"
#include "common/core/error.h"
#include "common/core/parallel.h"

#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif

namespace lab::bench {

namespace {

std::mutex& describer_mutex() {
  static std::mutex m;
  return m;
}
// In a CUDA build the describer starts as the CUDA runtime's view of the GPUs; set_gpu_describer replaces it.
std::function<void(MachineInfo&)> default_gpu_describer() {
#ifdef LAB_WITH_CUDA
  return [](MachineInfo& m) {
    m.gpu_count = cuda::device_count();
    if (m.gpu_count == 0) return;
    m.gpu_name = cuda::device_name(0);
    const int v = cuda::driver_version();
    m.gpu_driver = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
#else
  return {};
#endif
}

std::function<void(MachineInfo&)>& gpu_describer() {
  static std::function<void(MachineInfo&)> describer = default_gpu_describer();
  return describer;
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

std::string compiler_name() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

std::vector<std::string> compiled_features() {
  std::vector<std::string> f;
#ifdef LAB_WITH_BLAS
  f.push_back("blas");
#endif
#ifdef LAB_WITH_MPI
  f.push_back("mpi");
#endif
#ifdef LAB_WITH_CUDA
  f.push_back("cuda");
#endif
#ifdef __AVX512F__
  f.push_back("avx512f");
#endif
#ifdef __AVX2__
  f.push_back("avx2");
#endif
#ifdef __FMA__
  f.push_back("fma");
#endif
#ifdef __ARM_NEON
  f.push_back("neon");
#endif
  return f;
}

// Reads key `key` of object `json` with `get`, naming the key when it is missing or of the wrong type.
template <typename Get>
auto field(const Json& json, const char* key, Get get) {
  try {
    return get(json.at(key));
  } catch (const Error& e) {
    fail(ErrorKind::Format, "machine.", key, ": ", e.what());
  }
}

}  // namespace

MachineInfo describe_machine() {
  MachineInfo m;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  struct utsname u;
  if (uname(&u) == 0) m.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m.cpu_model = cpu_model_name();
  m.cpu_cores = usable_cpus();
  m.threads = num_threads();
  m.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  m.compiler = compiler_name();
#if defined(__OPTIMIZE__) && defined(NDEBUG)
  m.build_type = "optimized";
#elif defined(__OPTIMIZE__)
  m.build_type = "optimized with assertions";
#else
  m.build_type = "debug";
#endif
  m.features = compiled_features();
  std::lock_guard<std::mutex> lock(describer_mutex());
  if (gpu_describer()) gpu_describer()(m);
  return m;
}

void set_gpu_describer(std::function<void(MachineInfo&)> describer) {
  std::lock_guard<std::mutex> lock(describer_mutex());
  gpu_describer() = std::move(describer);
}

Json MachineInfo::to_json() const {
  Json features_json = Json::array();
  for (const std::string& f : features) features_json.push_back(f);
  return Json(Json::Object{{"hostname", hostname},
                           {"os", os},
                           {"cpu_model", cpu_model},
                           {"cpu_cores", cpu_cores},
                           {"threads", threads},
                           {"memory_bytes", memory_bytes},
                           {"compiler", compiler},
                           {"build_type", build_type},
                           {"features", features_json},
                           {"gpu_count", gpu_count},
                           {"gpu_name", gpu_name},
                           {"gpu_driver", gpu_driver},
                           {"gpu_memory_bytes", gpu_memory_bytes}});
}

MachineInfo MachineInfo::from_json(const Json& json) {
  LAB_CHECK(json.is_object(), Format, "machine: expected an object");
  auto str = [](const Json& v) { return v.as_string(); };
  auto integer = [](const Json& v) { return v.as_int(); };
  MachineInfo m;
  m.hostname = field(json, "hostname", str);
  m.os = field(json, "os", str);
  m.cpu_model = field(json, "cpu_model", str);
  m.cpu_cores = static_cast<int>(field(json, "cpu_cores", integer));
  m.threads = static_cast<int>(field(json, "threads", integer));
  m.memory_bytes = field(json, "memory_bytes", integer);
  m.compiler = field(json, "compiler", str);
  m.build_type = field(json, "build_type", str);
  m.features = field(json, "features", [](const Json& v) {
    std::vector<std::string> out;
    for (const Json& f : v.as_array()) out.push_back(f.as_string());
    return out;
  });
  m.gpu_count = static_cast<int>(field(json, "gpu_count", integer));
  m.gpu_name = field(json, "gpu_name", str);
  m.gpu_driver = field(json, "gpu_driver", str);
  m.gpu_memory_bytes = field(json, "gpu_memory_bytes", integer);
  return m;
}

std::string MachineInfo::summary() const {
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(memory_bytes) / (1024.0 * 1024 * 1024));
  std::string s = cat(cpu_model, " (", cpu_cores, " cores, ", memory, ")");
  if (gpu_count == 0) return s + ", no GPU";
  return cat(s, ", ", gpu_count, " x ", gpu_name);
}

}  // namespace lab::bench
