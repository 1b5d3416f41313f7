// The text report of bench_diff: header, machines, metrics, rows.
#include "common/bench/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/bench/text_table.h"

namespace lab::bench {

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string summary_text(const Summary& s) {
  return number(s.median) + " [" + number(s.min) + ", " + number(s.max) + "]";
}

// A row's label (its first member) as text.
std::string row_label(const Json& row) {
  const Json& v = row.as_object().front().second;
  return v.is_string() ? v.as_string() : v.dump();
}

std::string describe(const BenchResult& r, const std::string& label, const std::string& source) {
  return label + ": " + source + "\n   bench " + r.bench + ", " + r.date + ": " + r.command + "\n";
}

std::string machines_section(const BenchResult& a, const BenchResult& b) {
  if (a.machine == b.machine) return "Machine: the same for both: " + a.machine.summary() + "\n";
  TextTable t;
  t.add({"field", "A", "B"});
  const Json ja = a.machine.to_json();
  const Json jb = b.machine.to_json();
  for (const auto& [key, va] : ja.as_object()) {
    const Json& vb = jb.at(key);
    if (va.dump() == vb.dump()) continue;
    t.add({key, va.is_string() ? va.as_string() : va.dump(), vb.is_string() ? vb.as_string() : vb.dump()});
  }
  return "Machines differ (ratios compare the machines as well as the code):\n" + t.render("  ");
}

std::string metrics_section(const BenchResult& a, const BenchResult& b) {
  std::string out =
      "Metrics: B/A of the medians; a gain or regression only where the medians differ by more than the "
      "spread (max - min)\n";
  TextTable t;
  t.add({"metric", "unit", "better", "A median [min, max]", "B median [min, max]", "B/A", "verdict"});
  std::vector<std::string> only_a;
  for (const BenchMetric& ma : a.metrics) {
    const BenchMetric* mb = b.find_metric(ma.name);
    if (!mb) {
      only_a.push_back(ma.name);
      continue;
    }
    // The direction recorded in B wins: it is the newer description of the metric.
    const Comparison c = compare(ma.summary, mb->summary, mb->better);
    t.add({ma.name, mb->unit, better_name(mb->better), summary_text(ma.summary), summary_text(mb->summary),
           number(c.ratio), verdict_name(c.verdict)});
  }
  out += t.render("  ");
  std::vector<std::string> only_b;
  for (const BenchMetric& mb : b.metrics)
    if (!a.find_metric(mb.name)) only_b.push_back(mb.name);
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) {
      if (!s.empty()) s += ", ";
      s += n;
    }
    return s;
  };
  if (!only_a.empty()) out += "  only in A: " + list(only_a) + "\n";
  if (!only_b.empty()) out += "  only in B: " + list(only_b) + "\n";
  return out;
}

// The mark of one row value: "gain"/"regression" beyond the tolerance, "~" within it, "" when the
// column's direction is unknown.
std::string row_mark(const BenchColumn* column, double ratio, double tolerance) {
  if (!column || std::isnan(ratio)) return "";
  if (std::fabs(ratio - 1) <= tolerance) return "~";
  return (ratio < 1) == (column->better == Better::Lower) ? "gain" : "regression";
}

std::string rows_section(const BenchResult& a, const BenchResult& b, const DiffOptions& o) {
  if (a.rows.empty() && b.rows.empty()) return "";
  const std::string label_key = (a.rows.empty() ? b.rows : a.rows).front().as_object().front().first;
  std::string out = "Rows matched by \"" + label_key + "\": B/A per numeric column; marked where the change exceeds " +
                    number(100 * o.row_tolerance) + "% and the column's better direction is known\n";
  TextTable t;
  t.add({label_key, "column", "A", "B", "B/A", "mark"});
  std::set<std::string> matched;
  std::vector<std::string> only_a;
  for (const Json& ra : a.rows) {
    const std::string label = row_label(ra);
    const auto rb = std::find_if(b.rows.begin(), b.rows.end(), [&](const Json& r) { return row_label(r) == label; });
    if (rb == b.rows.end()) {
      only_a.push_back(label);
      continue;
    }
    matched.insert(label);
    const auto& members = ra.as_object();
    for (size_t i = 1; i < members.size(); ++i) {
      const auto& [key, va] = members[i];
      const Json* vb = rb->find(key);
      if (!vb) continue;
      if (va.is_number() && vb->is_number()) {
        const double ratio = va.as_number() != 0 ? vb->as_number() / va.as_number() : NAN;
        const BenchColumn* column = b.find_column(key) ? b.find_column(key) : a.find_column(key);
        t.add({label, key, number(va.as_number()), number(vb->as_number()), number(ratio),
               row_mark(column, ratio, o.row_tolerance)});
      } else if (va.dump() != vb->dump()) {
        t.add({label, key, va.is_string() ? va.as_string() : va.dump(), vb->is_string() ? vb->as_string() : vb->dump(),
               "-", "differs"});
      }
    }
  }
  out += t.render("  ");
  for (const std::string& label : only_a) out += "  only in A: row \"" + label + "\"\n";
  for (const Json& rb : b.rows)
    if (!matched.count(row_label(rb))) out += "  only in B: row \"" + row_label(rb) + "\"\n";
  return out;
}

}  // namespace

std::string diff_results(const BenchResult& a, const BenchResult& b, const DiffOptions& options) {
  std::string out = describe(a, "A", options.source_a) + describe(b, "B", options.source_b);
  if (a.bench != b.bench) out += "Note: these are results of different benches\n";
  out += machines_section(a, b);
  out += '\n';
  out += metrics_section(a, b);
  if (const std::string rows = rows_section(a, b, options); !rows.empty()) {
    out += '\n';
    out += rows;
  }
  return out;
}

}  // namespace lab::bench
