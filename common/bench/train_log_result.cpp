#include "common/bench/train_log_result.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "common/core/error.h"
#include "common/io/files.h"

namespace lab::bench {

namespace {

struct CurvePoint {
  std::optional<double> loss, val_loss;
};

// The steps at which the curve is shown: evaluations and the last step, or tenths of the run.
std::vector<int64_t> curve_steps(const std::map<int64_t, CurvePoint>& points, int64_t last_step) {
  std::vector<int64_t> steps;
  for (const auto& [step, point] : points)
    if (point.val_loss) steps.push_back(step);
  if (steps.empty()) {
    const int64_t stride = std::max<int64_t>(1, (last_step + 9) / 10);
    for (int64_t step = stride; step < last_step; step += stride) steps.push_back(step);
  }
  if (steps.empty() || steps.back() != last_step) steps.push_back(last_step);
  return steps;
}

Json number_or_null(const std::optional<double>& v) {
  return v ? Json(*v) : Json();
}

// The log `text` read from `path` (named in errors).
BenchResult parse_train_log(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  BenchResult r;
  r.bench = "gpt2_train";
  std::vector<double> step_ms, data_ms, tokens_per_s;
  std::map<int64_t, CurvePoint> points;
  int64_t last_step = 0;
  bool have_header = false;
  int64_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    try {
      const Json rec = Json::parse(line);
      LAB_CHECK(rec.is_object(), Format, "not a JSON object");
      if (rec.contains("log")) {
        if (have_header) continue;  // a resumed run's header: the first one describes the run
        r.command = rec.at("command").as_string();
        r.date = rec.at("date").as_string();
        r.machine = MachineInfo::from_json(rec.at("machine"));
        have_header = true;
        continue;
      }
      LAB_CHECK(have_header, Format, "the first record is not the header {\"log\": \"gpt2_train\", ...}");
      const int64_t step = rec.at("step").as_int();
      if (rec.contains("val_loss")) {
        points[step].val_loss = rec.at("val_loss").as_number();
      } else if (rec.contains("loss")) {
        points[step].loss = rec.at("loss").as_number();
        step_ms.push_back(rec.at("ms").as_number());
        data_ms.push_back(rec.at("data_ms").as_number());
        tokens_per_s.push_back(rec.at("tokens_per_s").as_number());
        last_step = std::max(last_step, step);
      }
    } catch (const Error& e) {
      fail(ErrorKind::Format, path, ": line ", line_number, ": ", e.what());
    }
  }
  LAB_CHECK(have_header, Format, path, ": an empty training log");
  LAB_CHECK(!step_ms.empty(), Format, path, ": a training log without any step");
  r.add_metric("step_ms", step_ms, "ms", Better::Lower);
  r.add_metric("data_ms", data_ms, "ms", Better::Lower);
  r.add_metric("tokens_per_s", tokens_per_s, "tokens/s", Better::Higher);
  r.describe_column("loss", "nats", Better::Lower);
  r.describe_column("val_loss", "nats", Better::Lower);
  for (const int64_t step : curve_steps(points, last_step)) {
    const CurvePoint& p = points[step];
    r.add_row(
        Json(Json::Object{{"step", step}, {"loss", number_or_null(p.loss)}, {"val_loss", number_or_null(p.val_loss)}}));
  }
  return r;
}

}  // namespace

BenchResult result_from_train_log(const std::string& path) {
  return parse_train_log(read_file(path), path);
}

BenchResult read_result_or_train_log(const std::string& path) {
  const std::string text = read_file(path);
  // A bench result is one JSON document with "metrics"; a log is one object per line, starting with its header.
  const size_t first_line_end = text.find('\n');
  try {
    const Json first = Json::parse(text.substr(0, first_line_end));
    if (first.is_object() && first.contains("log")) return parse_train_log(text, path);
  } catch (const Error&) {
    // Not a one-line JSON object: a pretty-printed bench result, or something neither can read.
  }
  return BenchResult::read(path);
}

}  // namespace lab::bench
