// PyTorch's step beside a staircase, through tools/compare/pytorch_gpt2_step.py (see pytorch_rows.h).
#include "ch10_gpt2/bench/pytorch_rows.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/bench/result.h"
#include "common/core/error.h"

namespace lab {

namespace {

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string first_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  // The script's error is its last line on stderr (a Python traceback ends with the exception).
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

PyTorchRow run_one(const PyTorchWorkload& w, const std::string& dtype, bool compile, const std::string& scratch) {
  PyTorchRow row;
  row.name = cat("pytorch ", compile ? "compile " : "eager ", dtype);
  const std::string json = cat(scratch, "/", compile ? "compile" : "eager", ".json"), err = scratch + "/stderr.txt";
  const std::string command = cat(
      shell_quoted(w.python), " ", shell_quoted(std::string(LAB_SOURCE_DIR) + "/tools/compare/pytorch_gpt2_step.py"),
      " --model ", shell_quoted(w.model), " --device ", w.device.is_cuda() ? "cuda" : "cpu", " --dtype ", dtype,
      " --batch ", w.batch, " --seq ", w.seq, " --steps ", w.steps, " --warmup ", w.warmup, " --threads ", w.threads,
      compile ? " --compile" : "", " --json ", shell_quoted(json), " > /dev/null 2> ", shell_quoted(err));
  std::fflush(stdout);
  const int status = std::system(command.c_str());
  if (status != 0) {
    row.error = first_line_of(err);
    if (row.error.empty()) row.error = cat(w.python, " exited with status ", status);
    return row;
  }
  const bench::BenchResult result = bench::BenchResult::read(json);
  LAB_CHECK(result.rows.size() == 1, Internal, json, ": expected one row");
  const Json& r = result.rows[0];
  row.ran = true;
  row.ms = r.at("ms_median").as_number();
  row.tokens_per_s = r.at("tokens_per_s").as_number();
  if (!r.at("mem_peak_bytes").is_null()) row.peak_bytes = r.at("mem_peak_bytes").as_number();
  return row;
}

}  // namespace

std::vector<PyTorchRow> run_pytorch_rows(const PyTorchWorkload& workload) {
  char scratch_template[] = "/tmp/gpt2_step_bench_pytorch_XXXXXX";
  const char* scratch = mkdtemp(scratch_template);
  LAB_CHECK(scratch, Io, "cannot create a scratch directory under /tmp for the PyTorch runs");
  std::vector<PyTorchRow> rows;
  if (workload.device.is_cuda()) {
    rows.push_back(run_one(workload, "bf16", false, scratch));
    rows.push_back(run_one(workload, "bf16", true, scratch));
  } else {
    rows.push_back(run_one(workload, "fp32", false, scratch));
  }
  std::filesystem::remove_all(scratch);  // the directory this made, and only what the runs wrote in it
  return rows;
}

std::string pytorch_table(const std::vector<PyTorchRow>& rows, const std::string& ours_name, double ours_tokens_per_s) {
  std::string out =
      cat("beside PyTorch (tools/compare/pytorch_gpt2_step.py, the same model, batch and sequence; "
          "ours: the '",
          ours_name, "' rung):\n");
  for (const PyTorchRow& r : rows) {
    if (!r.ran) {
      out += cat("  ", r.name, ": not run: ", r.error, "\n");
      continue;
    }
    char line[256];
    std::snprintf(line, sizeof line, "  %s: %.1f ms, %.0f tokens/s%s; ours / PyTorch tokens/s = x%.3f\n",
                  r.name.c_str(), r.ms, r.tokens_per_s,
                  r.peak_bytes ? cat(", allocator peak ", *r.peak_bytes / 1e6, " MB").c_str() : "",
                  ours_tokens_per_s / r.tokens_per_s);
    out += line;
  }
  return out;
}

}  // namespace lab
