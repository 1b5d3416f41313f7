// Staircases: flags as settings, the one-change rule, running the rungs and comparing them (see
// staircase.h); the report is in staircase_report.cpp.
#include "common/lab/staircase.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <set>
#include <utility>

#include "common/core/error.h"

namespace lab::staircase {

namespace {

// The flags in order as (name, value) pairs, booleans given their value.
std::vector<std::pair<std::string, std::string>> parse_flag_list(const std::vector<std::string>& flags) {
  std::vector<std::pair<std::string, std::string>> settings;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& token = flags[i];
    LAB_CHECK(token.size() > 2 && token.rfind("--", 0) == 0, InvalidArgument, "expected a flag (--name), found '",
              token, "'", i > 0 ? cat(" after '", flags[i - 1], "'") : std::string());
    const std::string body = token.substr(2);
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      settings.emplace_back(body.substr(0, eq), body.substr(eq + 1));
    } else if (i + 1 < flags.size() && flags[i + 1].rfind("--", 0) != 0) {
      settings.emplace_back(body, flags[++i]);
    } else if (body.rfind("no-", 0) == 0) {
      settings.emplace_back(body.substr(3), "false");
    } else {
      settings.emplace_back(body, "true");
    }
  }
  return settings;
}

}  // namespace

std::vector<std::string> Staircase::flags_for(const Rung& rung) const {
  std::vector<std::string> flags = base_flags;
  flags.insert(flags.end(), rung.flags.begin(), rung.flags.end());
  return flags;
}

Settings parse_settings(const std::vector<std::string>& flags) {
  Settings settings;
  for (auto& [name, value] : parse_flag_list(flags)) settings[name] = value;
  return settings;
}

std::string describe_change(const Settings& before, const Settings& after) {
  std::string text;
  auto add = [&](const std::string& part) { text += cat(text.empty() ? "" : "; ", part); };
  for (const auto& [name, value] : after) {
    const auto old = before.find(name);
    if (old == before.end())
      add(cat("+ --", name, " ", value));
    else if (old->second != value)
      add(cat("--", name, " ", old->second, " -> ", value));
  }
  for (const auto& [name, value] : before)
    if (!after.count(name)) add(cat("- --", name, " ", value));
  return text.empty() ? "no change" : text;
}

std::vector<std::string> check_one_change_per_rung(const Staircase& staircase) {
  std::vector<std::string> problems;
  const std::string where = cat("staircase ", staircase.name, ": ");
  std::set<std::string> names;
  std::optional<Settings> below;
  for (size_t i = 0; i < staircase.rungs.size(); ++i) {
    const Rung& rung = staircase.rungs[i];
    const std::string label = cat(where, "rung ", i + 1, " (", rung.name, ")");
    if (rung.name.empty()) problems.push_back(cat(label, " has no name"));
    if (!rung.name.empty() && !names.insert(rung.name).second) problems.push_back(cat(label, ": the name is taken"));
    Settings settings;
    try {
      std::set<std::string> seen;
      for (const auto& [name, value] : parse_flag_list(rung.flags))
        if (!seen.insert(name).second) problems.push_back(cat(label, " sets --", name, " twice"));
      settings = parse_settings(staircase.flags_for(rung));
    } catch (const Error& e) {
      problems.push_back(cat(label, ": ", e.what()));
      below.reset();  // nothing to compare the next rung with
      continue;
    }
    if (below) {
      int added_or_changed = 0;
      bool dropped = false;
      for (const auto& [name, value] : settings) {
        const auto old = below->find(name);
        added_or_changed += old == below->end() || old->second != value;
      }
      for (const auto& [name, value] : *below) dropped |= !settings.count(name);
      if (added_or_changed != 1 || dropped)
        problems.push_back(cat(label, " must add or change exactly one setting of the rung below and keep the rest; ",
                               "it changes: ", describe_change(*below, settings)));
    }
    below = std::move(settings);
  }
  return problems;
}

Staircase cumulative_staircase(std::string name, std::string description, std::vector<std::string> base_flags,
                               const std::vector<Change>& changes, bool on_gpu) {
  Staircase stairs{std::move(name), std::move(description), std::move(base_flags), {}};
  std::vector<std::pair<std::string, std::string>> kept;  // every rung keeps the settings of the rungs below
  for (const Change& change : changes) {
    if (change.gpu_only && !on_gpu) continue;
    // A rung that changes a setting a lower rung made replaces its value (fp32 -> tf32 both set --dtype).
    const auto same = std::find_if(kept.begin(), kept.end(), [&](const auto& s) { return s.first == change.flag; });
    if (same != kept.end())
      same->second = change.value;
    else
      kept.emplace_back(change.flag, change.value);
    std::vector<std::string> flags;
    for (const auto& [flag, value] : kept) {
      flags.push_back(flag);
      if (!value.empty()) flags.push_back(value);
    }
    stairs.rungs.push_back({change.name, change.what_changes, flags});
  }
  return stairs;
}

const MetricReport* RungReport::find(const std::string& metric) const {
  for (const MetricReport& m : metrics)
    if (m.name == metric) return &m;
  return nullptr;
}

void compare_rungs(std::vector<RungReport>& rungs) {
  for (size_t i = 0; i < rungs.size(); ++i) {
    for (MetricReport& m : rungs[i].metrics) {
      m.previous = -1;
      m.vs_previous.reset();
      m.vs_first.reset();
      const MetricReport* first = nullptr;
      for (size_t j = 0; j < i; ++j) {
        const MetricReport* earlier = rungs[j].ran ? rungs[j].find(m.name) : nullptr;
        if (!earlier) continue;
        if (!first) first = earlier;
        m.previous = static_cast<int>(j);
        m.vs_previous = bench::compare(earlier->summary, m.summary, m.better);
      }
      if (first) m.vs_first = bench::compare(first->summary, m.summary, m.better);
    }
  }
}

StaircaseReport run_staircase(const Staircase& staircase, const RunRung& run,
                              const std::function<void(const RungReport&)>& on_rung) {
  const std::vector<std::string> problems = check_one_change_per_rung(staircase);
  if (!problems.empty()) {
    std::string text;
    for (const std::string& p : problems) text += cat("\n  ", p);
    fail(ErrorKind::InvalidArgument, "the staircase is not one change per rung:", text);
  }
  StaircaseReport report;
  report.name = staircase.name;
  report.description = staircase.description;
  std::optional<Settings> below;
  for (const Rung& rung : staircase.rungs) {
    RungReport r;
    r.rung = rung;
    const Settings settings = parse_settings(staircase.flags_for(rung));
    r.change = below ? describe_change(*below, settings) : "(base)";
    below = settings;
    try {
      for (const Measurement& m : run(rung)) {
        LAB_CHECK(!m.samples.empty(), InvalidArgument, "rung ", rung.name, ": measurement ", m.name, " has no samples");
        MetricReport metric;
        metric.name = m.name;
        metric.unit = m.unit;
        metric.better = m.better;
        metric.summary = bench::summarize(m.samples);
        r.metrics.push_back(std::move(metric));
      }
      r.ran = true;
    } catch (const std::exception& e) {
      r.metrics.clear();
      r.error = e.what();
    }
    report.rungs.push_back(std::move(r));
    if (on_rung) on_rung(report.rungs.back());
  }
  compare_rungs(report.rungs);
  return report;
}

}  // namespace lab::staircase
