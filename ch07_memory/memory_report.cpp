// The memory report and the per-step peaks of the JSON log (see memory_report.h).
#include "ch07_memory/memory_report.h"

#include <cstdio>
#include <fstream>

namespace lab::ch07 {

namespace {

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

int64_t status_field_bytes(const std::string& text, const char* field) {
  const size_t at = text.find(field);
  if (at == std::string::npos) return 0;
  return std::strtoll(text.c_str() + at + std::char_traits<char>::length(field), nullptr, 10) * 1024;  // kB
}

}  // namespace

ProcessMemory process_memory() {
  std::ifstream in("/proc/self/status");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {status_field_bytes(text, "VmRSS:"), status_field_bytes(text, "VmHWM:")};
}

std::string memory_report(const MemoryStats& stats, const MemoryTheory& theory, const ProcessMemory& process) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %10s %10s %10s %8s\n", "category", "live MiB", "peak MiB", "theory MiB",
                "peak/th.");
  out += line;
  for (int i = 0; i < kNumMemCategories; ++i) {
    const auto c = static_cast<MemCategory>(i);
    const int64_t th = theory.of(c);
    if (stats.live[i] == 0 && stats.peak[i] == 0 && th == 0) continue;
    char theory_mib[16] = "-", ratio[16] = "-";
    if (th > 0) {
      std::snprintf(theory_mib, sizeof theory_mib, "%.1f", mib(th));
      std::snprintf(ratio, sizeof ratio, "%.3f", static_cast<double>(stats.peak[i]) / static_cast<double>(th));
    }
    std::snprintf(line, sizeof line, "%-12s %10.1f %10.1f %10s %8s\n", mem_category_name(c), mib(stats.live[i]),
                  mib(stats.peak[i]), theory_mib, ratio);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-12s %10.1f %10.1f %10.1f\n", "total", mib(stats.live_total),
                mib(stats.peak_total), mib(theory.total()));
  out += line;
  std::snprintf(line, sizeof line,
                "activations in theory: %lld elements and %lld bytes of attention per token per block, %lld "
                "elements outside the blocks, %lld bytes per token in all (the peak adds backward's gradients in "
                "flight)\n",
                static_cast<long long>(theory.activation_elements_per_token_per_block),
                static_cast<long long>(theory.attention_bytes_per_token_per_block),
                static_cast<long long>(theory.activation_elements_per_token_outside),
                static_cast<long long>(theory.activation_bytes_per_token));
  out += line;
  std::snprintf(line, sizeof line,
                "allocator: live peak %.1f MiB + cache and rounding %.1f MiB = reserved peak %.1f MiB\n",
                mib(stats.peak_total), mib(stats.peak_reserved - stats.peak_total), mib(stats.peak_reserved));
  out += line;
  if (process.peak_resident > 0) {
    std::snprintf(line, sizeof line,
                  "process: reserved peak %.1f MiB + outside the allocator %.1f MiB (code, libraries, stacks, BLAS "
                  "buffers, heap) = peak resident %.1f MiB\n",
                  mib(stats.peak_reserved), mib(process.peak_resident - stats.peak_reserved),
                  mib(process.peak_resident));
    out += line;
  }
  return out;
}

Json peak_by_category_json(const MemoryStats& stats) {
  Json j = Json::object();
  for (int i = 0; i < kNumMemCategories; ++i) j.set(mem_category_name(static_cast<MemCategory>(i)), stats.peak[i]);
  return j;
}

}  // namespace lab::ch07
