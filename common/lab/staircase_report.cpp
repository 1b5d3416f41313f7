// The report of a staircase: a text table for people, rows and metrics of a bench result (see staircase.h).
#include <cstdio>

#include "common/bench/text_table.h"
#include "common/core/error.h"
#include "common/lab/staircase.h"

namespace lab::staircase {

namespace {

std::string significant(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string ratio_text(const std::optional<bench::Comparison>& c) {
  return c ? cat("x", significant(c->ratio), " (", bench::verdict_name(c->verdict), ")") : "-";
}

Json ratio_json(const std::optional<bench::Comparison>& c) {
  return c ? Json(c->ratio) : Json();
}

}  // namespace

std::string StaircaseReport::table() const {
  std::string out = cat("staircase ", name, ": ", description,
                        "\n  each rung against the one below it and the first: ratio after/before of the medians, a "
                        "gain or a regression only beyond the spread of the repeats\n");
  bench::TextTable t;
  t.add({"", "rung", "change", "measurement", "median [min, max]", "vs previous", "vs first"});
  for (size_t i = 0; i < rungs.size(); ++i) {
    const RungReport& r = rungs[i];
    const std::string number = std::to_string(i + 1);
    if (!r.ran) {
      t.add({number, r.rung.name, r.change, cat("not run: ", r.error)});
      continue;
    }
    for (size_t k = 0; k < r.metrics.size(); ++k) {
      const MetricReport& m = r.metrics[k];
      const bool first_line = k == 0;
      t.add(
          {first_line ? number : "", first_line ? r.rung.name : "", first_line ? r.change : "",
           cat(m.name, " (", m.unit, ")"),
           cat(significant(m.summary.median), " [", significant(m.summary.min), ", ", significant(m.summary.max), "]"),
           m.vs_previous ? cat(ratio_text(m.vs_previous), " vs ", rungs[static_cast<size_t>(m.previous)].rung.name)
                         : "-",
           ratio_text(m.vs_first)});
    }
  }
  out += t.render("  ");
  for (size_t i = 0; i < rungs.size(); ++i)
    if (!rungs[i].rung.what_changes.empty())
      out += cat("  ", i + 1, " ", rungs[i].rung.name, ": ", rungs[i].rung.what_changes, "\n");
  return out;
}

void StaircaseReport::add_to(bench::BenchResult& result) const {
  for (const RungReport& r : rungs) {
    Json row = Json::object();
    row.set("rung", r.rung.name);  // the label bench_diff pairs rows by
    row.set("what_changes", r.rung.what_changes);
    row.set("change", r.change);
    std::string flags;
    for (const std::string& f : r.rung.flags) flags += cat(flags.empty() ? "" : " ", f);
    row.set("flags", flags);
    row.set("status", r.ran ? "ok" : "not run");
    row.set("error", r.ran ? Json() : Json(r.error));
    for (const MetricReport& m : r.metrics) {
      row.set(m.name + "_median", m.summary.median);
      row.set(m.name + "_min", m.summary.min);
      row.set(m.name + "_max", m.summary.max);
      row.set(m.name + "_vs_previous", ratio_json(m.vs_previous));
      row.set(m.name + "_verdict_vs_previous",
              m.vs_previous ? Json(bench::verdict_name(m.vs_previous->verdict)) : Json());
      row.set(m.name + "_vs_first", ratio_json(m.vs_first));
      for (const char* part : {"_median", "_min", "_max"}) result.describe_column(m.name + part, m.unit, m.better);
      for (const char* part : {"_vs_previous", "_vs_first"}) result.describe_column(m.name + part, "ratio", m.better);
      result.add_metric(cat(r.rung.name, ".", m.name), m.summary, m.unit, m.better);
    }
    result.add_row(row);
  }
}

}  // namespace lab::staircase
