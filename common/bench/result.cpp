// BenchResult to and from JSON.
#include "common/bench/result.h"

#include <cctype>
#include <ctime>

#include "common/core/error.h"
#include "common/io/files.h"

namespace lab::bench {

namespace {

// Runs `parse`, turning any error into Error(Format) prefixed with `where` (a path into the document:
// "metrics.step_ms").
template <typename Parse>
auto in_context(const std::string& where, Parse parse) {
  try {
    return parse();
  } catch (const Error& e) {
    fail(ErrorKind::Format, where, ": ", e.what());
  }
}

bool is_flat_value(const Json& v) {
  return v.is_number() || v.is_string() || v.is_bool() || v.is_null();
}

void check_row(const Json& row) {
  LAB_CHECK(row.is_object() && row.size() > 0, InvalidArgument, "a result row must be a non-empty object, got ",
            row.dump());
  for (const auto& [key, value] : row.as_object())
    LAB_CHECK(is_flat_value(value), InvalidArgument, "result row member '", key,
              "' must be a number, string, boolean or null (rows are flat)");
}

Json metric_to_json(const BenchMetric& m) {
  return Json(Json::Object{{"median", m.summary.median},
                           {"min", m.summary.min},
                           {"max", m.summary.max},
                           {"unit", m.unit},
                           {"better", better_name(m.better)},
                           {"count", m.summary.count},
                           {"mean", m.summary.mean},
                           {"stddev", m.summary.stddev}});
}

BenchMetric metric_from_json(const std::string& name, const Json& j) {
  BenchMetric m;
  m.name = name;
  m.summary.median = j.at("median").as_number();
  m.summary.min = j.at("min").as_number();
  m.summary.max = j.at("max").as_number();
  m.unit = j.at("unit").as_string();
  if (const Json* b = j.find("better")) m.better = parse_better(b->as_string());
  if (const Json* c = j.find("count")) m.summary.count = c->as_int();
  if (const Json* mean = j.find("mean")) m.summary.mean = mean->as_number();
  if (const Json* sd = j.find("stddev")) m.summary.stddev = sd->as_number();
  LAB_CHECK(m.summary.min <= m.summary.median && m.summary.median <= m.summary.max, Format,
            "expected min <= median <= max, got ", m.summary.min, ", ", m.summary.median, ", ", m.summary.max);
  return m;
}

// Shell-safe characters need no quoting; anything else is wrapped in single quotes.
bool needs_quotes(const std::string& arg) {
  if (arg.empty()) return true;
  for (char c : arg) {
    const bool safe =
        std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
    if (!safe) return true;
  }
  return false;
}

}  // namespace

BenchResult BenchResult::start(std::string bench, int argc, char** argv) {
  BenchResult r;
  r.bench = std::move(bench);
  r.machine = describe_machine();
  r.command = command_line(argc, argv);
  r.date = iso8601_utc_now();
  return r;
}

void BenchResult::add_metric(const std::string& name, const Summary& summary, const std::string& unit, Better better) {
  BenchMetric m{name, summary, unit, better};
  for (BenchMetric& existing : metrics) {
    if (existing.name == name) {
      existing = std::move(m);
      return;
    }
  }
  metrics.push_back(std::move(m));
}

void BenchResult::describe_column(const std::string& name, const std::string& unit, Better better) {
  BenchColumn c{name, unit, better};
  for (BenchColumn& existing : columns) {
    if (existing.name == name) {
      existing = std::move(c);
      return;
    }
  }
  columns.push_back(std::move(c));
}

void BenchResult::add_row(Json row) {
  check_row(row);
  rows.push_back(std::move(row));
}

const BenchMetric* BenchResult::find_metric(const std::string& name) const {
  for (const BenchMetric& m : metrics)
    if (m.name == name) return &m;
  return nullptr;
}

const BenchColumn* BenchResult::find_column(const std::string& name) const {
  for (const BenchColumn& c : columns)
    if (c.name == name) return &c;
  return nullptr;
}

Json BenchResult::to_json() const {
  Json metrics_json = Json::object();
  for (const BenchMetric& m : metrics) metrics_json.set(m.name, metric_to_json(m));
  Json columns_json = Json::object();
  for (const BenchColumn& c : columns)
    columns_json.set(c.name, Json(Json::Object{{"unit", c.unit}, {"better", better_name(c.better)}}));
  return Json(Json::Object{{"bench", bench},
                           {"machine", machine.to_json()},
                           {"command", command},
                           {"date", date},
                           {"metrics", metrics_json},
                           {"columns", columns_json},
                           {"rows", Json(Json::Array(rows))}});
}

BenchResult BenchResult::from_json(const Json& json) {
  LAB_CHECK(json.is_object(), Format, "a bench result must be a JSON object");
  BenchResult r;
  r.bench = in_context("bench", [&] { return json.at("bench").as_string(); });
  r.machine = MachineInfo::from_json(in_context("machine", [&] { return json.at("machine"); }));
  r.command = in_context("command", [&] { return json.at("command").as_string(); });
  r.date = in_context("date", [&] { return json.at("date").as_string(); });
  // The members are named rather than bound (`auto& [name, value]`): clang cannot capture a structured
  // binding in a lambda where OpenMP is on.
  for (const auto& member : in_context("metrics", [&] { return json.at("metrics").as_object(); })) {
    const std::string& name = member.first;
    const Json& value = member.second;
    r.metrics.push_back(in_context("metrics." + name, [&] { return metric_from_json(name, value); }));
  }
  if (const Json* columns = json.find("columns")) {
    for (const auto& member : in_context("columns", [&] { return columns->as_object(); })) {
      const std::string& name = member.first;
      const Json& value = member.second;
      r.columns.push_back(in_context("columns." + name, [&] {
        return BenchColumn{name, value.at("unit").as_string(), parse_better(value.at("better").as_string())};
      }));
    }
  }
  const Json::Array rows = in_context("rows", [&] { return json.at("rows").as_array(); });
  for (size_t i = 0; i < rows.size(); ++i) {
    in_context(cat("rows[", i, "]"), [&] { check_row(rows[i]); });
    r.rows.push_back(rows[i]);
  }
  return r;
}

void BenchResult::write(const std::string& path) const {
  write_file_atomic(path, to_json().dump(2) + "\n");
}

void BenchResult::check_destination(const std::string& path) {
  check_file_writable(path);
  if (!file_exists(path)) return;
  try {
    read(path);
  } catch (const Error& e) {
    fail(ErrorKind::Io, "refusing to overwrite '", path, "': it is not a bench result (", e.what(),
         "); give a new path");
  }
}

BenchResult BenchResult::read(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return from_json(Json::parse(text));
  } catch (const Error& e) {
    fail(ErrorKind::Format, path, ": ", e.what());
  }
}

std::string iso8601_utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    if (i) out += ' ';
    const std::string arg = argv[i];
    if (!needs_quotes(arg)) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) {
      if (c == '\'')
        out += "'\\''";  // close the quotes, an escaped quote, reopen
      else
        out += c;
    }
    out += '\'';
  }
  return out;
}

}  // namespace lab::bench
