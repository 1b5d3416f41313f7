// The step profile's records and table (see step_profile.h).
#include "common/core/step_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "common/core/error.h"
#include "common/core/gpu_backend.h"

namespace lab {

namespace {

std::atomic<StepProfile*> g_open{nullptr};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StepProfile::StepProfile() {
  StepProfile* expected = nullptr;
  LAB_CHECK(g_open.compare_exchange_strong(expected, this), InvalidArgument,
            "a step profile is open already: one at a time");
}

StepProfile::~StepProfile() {
  close();
}

StepProfile* StepProfile::open_profile() {
  return g_open.load(std::memory_order_acquire);
}

void StepProfile::add(ProfileKind kind, const char* name, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ProfileRow& row = rows_[{kind, name}];
  if (row.name.empty()) {
    row.name = name;
    // A template kernel is launched in parentheses, LAB_LAUNCH((kernel<T>), ...): its name without them.
    if (row.name.size() > 2 && row.name.front() == '(' && row.name.back() == ')')
      row.name = row.name.substr(1, row.name.size() - 2);
  }
  ++row.calls;
  row.seconds += seconds;
}

void StepProfile::add_zero_fill(int64_t bytes) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++zero_fills_.count;
  zero_fills_.bytes += bytes;
}

std::string ZeroFills::line() const {
  char text[64];
  std::snprintf(text, sizeof(text), "%lld zero-fills, %.1f MB", static_cast<long long>(count),
                static_cast<double>(bytes) / 1e6);
  return text;
}

ZeroFills StepProfile::zero_fills() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return zero_fills_;
}

void StepProfile::at_close(std::function<void(StepProfile&)> finish) {
  const std::lock_guard<std::mutex> lock(mutex_);
  finishers_.push_back(std::move(finish));
}

void StepProfile::close() {
  StepProfile* self = this;
  if (!g_open.compare_exchange_strong(self, nullptr)) return;  // closed already: no record arrives any more
  std::vector<std::function<void(StepProfile&)>> finishers;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    finishers.swap(finishers_);
  }
  for (const auto& finish : finishers) finish(*this);
  closed_ = true;
}

std::vector<ProfileRow> StepProfile::rows(ProfileKind kind) const {
  std::vector<ProfileRow> out;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, row] : rows_)
      if (key.first == kind) out.push_back(row);
  }
  std::sort(out.begin(), out.end(), [](const ProfileRow& a, const ProfileRow& b) {
    if (a.seconds != b.seconds) return a.seconds > b.seconds;
    if (a.calls != b.calls) return a.calls > b.calls;
    return a.name < b.name;
  });
  return out;
}

int64_t StepProfile::calls(ProfileKind kind) const {
  int64_t n = 0;
  for (const ProfileRow& row : rows(kind)) n += row.calls;
  return n;
}

std::string StepProfile::table(ProfileKind kind) const {
  const std::vector<ProfileRow> all = rows(kind);
  double total = 0;
  size_t width = 4;
  for (const ProfileRow& row : all) {
    total += row.seconds;
    width = std::max(width, row.name.size());
  }
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "  %-*s  %7s  %10s  %6s  %10s\n", static_cast<int>(width),
                kind == ProfileKind::Op ? "op" : "kernel", "calls", "total ms", "share", "us/call");
  out += line;
  for (const ProfileRow& row : all) {
    std::snprintf(line, sizeof line, "  %-*s  %7lld  %10.3f  %5.1f%%  %10.1f\n", static_cast<int>(width),
                  row.name.c_str(), static_cast<long long>(row.calls), row.seconds * 1e3,
                  total > 0 ? 100.0 * row.seconds / total : 0.0, row.seconds * 1e6 / static_cast<double>(row.calls));
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-*s  %7lld  %10.3f\n", static_cast<int>(width), "total",
                static_cast<long long>(calls(kind)), total * 1e3);
  out += line;
  return out;
}

ProfiledOp::ProfiledOp(const char* name) : name_(name), profile_(StepProfile::open_profile()) {
  if (const GpuBackend* gpu = gpu_backend()) gpu->range_push(name);
  if (profile_) start_ns_ = now_ns();
}

ProfiledOp::~ProfiledOp() {
  if (profile_ && StepProfile::open_profile() == profile_)
    profile_->add(ProfileKind::Op, name_, static_cast<double>(now_ns() - start_ns_) * 1e-9);
  if (const GpuBackend* gpu = gpu_backend()) gpu->range_pop();
}

}  // namespace lab
