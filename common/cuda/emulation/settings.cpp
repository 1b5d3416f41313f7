#include "common/cuda/emulation/settings.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/cuda/emulation/dry_run.h"

namespace lab::cuda::emu {

namespace {

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer pads every stack frame with red zones: the same kernel needs a larger stack.
constexpr size_t kDefaultStackKiB = 256;
#else
constexpr size_t kDefaultStackKiB = 64;
#endif
constexpr uint64_t kDefaultDeviceMemory = uint64_t{80} << 30;

[[noreturn]] void bad_value(const char* name, const char* value, const char* expected) {
  std::fprintf(stderr, "lab cuda emulation: %s='%s' is not %s\n", name, value, expected);
  std::exit(2);
}

// An unsigned integer with an optional binary suffix (K, M, G, T); the whole string must parse.
std::optional<uint64_t> parse_size(const char* text, bool allow_suffix) {
  if (text[0] == '\0' || text[0] == '-' || text[0] == '+') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return std::nullopt;
  int shift = 0;
  if (allow_suffix && *end != '\0') {
    const std::string suffix = end;
    if (suffix == "K" || suffix == "k")
      shift = 10;
    else if (suffix == "M" || suffix == "m")
      shift = 20;
    else if (suffix == "G" || suffix == "g")
      shift = 30;
    else if (suffix == "T" || suffix == "t")
      shift = 40;
    else
      return std::nullopt;
  } else if (*end != '\0') {
    return std::nullopt;
  }
  if (shift > 0 && value > (~uint64_t{0} >> shift)) return std::nullopt;
  return static_cast<uint64_t>(value) << shift;
}

// The value of `name` in [min, max], or `fallback` when unset or empty.
uint64_t read(const char* name, uint64_t fallback, uint64_t min, uint64_t max, bool allow_suffix,
              const char* expected) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return fallback;
  const std::optional<uint64_t> value = parse_size(text, allow_suffix);
  if (!value || *value < min || *value > max) bad_value(name, text, expected);
  return *value;
}

Settings read_settings() {
  Settings s;
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  s.workers = static_cast<int>(read("LAB_EMU_WORKERS", hardware, 1, 1024, false, "a thread count in [1, 1024]"));
  if (const char* seed = std::getenv("LAB_EMU_SEED"); seed != nullptr && seed[0] != '\0') {
    const std::optional<uint64_t> value = parse_size(seed, false);
    if (!value) bad_value("LAB_EMU_SEED", seed, "an unsigned integer");
    s.seed = *value;
  }
  s.fiber_stack_bytes =
      read("LAB_EMU_STACK_KB", kDefaultStackKiB, 16, 1 << 20, false, "a stack size in KiB in [16, 1048576]") << 10;
  s.device_memory_bytes = read("LAB_EMU_MEMORY", kDefaultDeviceMemory, 1 << 20, uint64_t{1} << 50, true,
                               "a size between 1M and 1024T (bytes, or with a K/M/G/T suffix)");
  s.device_count = static_cast<int>(read("LAB_EMU_DEVICES", 1, 0, 64, false, "a device count in [0, 64]"));
  s.deadlock_seconds =
      static_cast<int>(read("LAB_EMU_DEADLOCK_SECONDS", 30, 0, 86400, false, "a number of seconds in [0, 86400]"));
  s.dry_run = read("LAB_EMU_DRY_RUN", 0, 0, 1, false, "0 or 1") == 1;
  if (s.dry_run)
    std::fprintf(stderr,
                 "lab cuda emulation: LAB_EMU_DRY_RUN=1: kernels, cuBLAS products, memsets and device-to-device "
                 "copies are checked and counted but not run; every computed value is meaningless, the allocations "
                 "and launches are exact\n");
  return s;
}

}  // namespace

const Settings& settings() {
  static const Settings s = read_settings();
  return s;
}

namespace {

std::atomic<bool>& dry_run_flag() {
  static std::atomic<bool> flag{settings().dry_run};
  return flag;
}

}  // namespace

bool dry_run() {
  return dry_run_flag().load(std::memory_order_relaxed);
}

void set_dry_run(bool on) {
  dry_run_flag().store(on, std::memory_order_relaxed);
}

}  // namespace lab::cuda::emu
