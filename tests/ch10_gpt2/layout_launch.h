// What the tests of gpt2_train's parallel layouts share: the tiny run's flags, gpt2_train launched as one
// process or under mpirun (each rank's standard output and error kept apart by Open MPI's --output-filename),
// and the comparison of two JSON logs step by step.
//
// A layout's run must log what the one-process run with the same global batch logs: the training losses and
// the validation losses, within 1e-5 relative (fp32 sums in another order), and the same text sampled at the
// end; nothing may be printed by a rank other than 0.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/ch10_gpt2/trainer_fixtures.h"

namespace lab::testing {

// The tiny run of every layout test, without the batch and layout flags: a learning-rate schedule whose
// horizon does not depend on --steps (so that a run stopped at step 2 and resumed goes where the whole run
// goes), validation every 2 steps on 2 batches, one CPU thread per rank.
inline std::string layout_run_flags(const std::string& dir, const std::string& device) {
  write_tiny_shards(dir);
  return "--data-train '" + dir + "/train_*.bin' --data-val " + dir + "/val_000000.bin --model tiny --device " +
         device +
         " --seq 16 --lr 0.01 --warmup-steps 2 --lr-decay-steps 4 --eval-every 2 --val-batches 2 "
         "--sample-tokens 0 --threads 1";
}

struct LaunchResult {
  int exit_code = -1;
  std::vector<std::string> out, err;  // per rank
  std::string log;                    // the --log-json file
};

// Runs `gpt2_train <flags> --log-json <dir>/<name>.jsonl` as one process (ranks 1) or as `ranks` processes
// under mpirun.
inline LaunchResult launch_trainer(const std::string& dir, const std::string& name, int ranks,
                                   const std::string& flags) {
  LaunchResult r;
  r.log = dir + "/" + name + ".jsonl";
  const std::string args = flags + " --log-json " + r.log;
  if (ranks == 1) {
    const ProcessResult p = run_gpt2_train(args);
    r.exit_code = p.exit_code;
    r.out = {p.out};
    r.err = {p.err};
    return r;
  }
  // Open MPI writes rank n's streams to <outputs>/1/rank.<n>/stdout and stderr.
  const std::filesystem::path outputs = std::filesystem::path(dir) / (name + ".outputs");
  std::filesystem::remove_all(outputs);
  const std::string cmd = std::string(LAB_MPIEXEC) + " -n " + std::to_string(ranks) +
                          " --oversubscribe --bind-to none --output-filename " + outputs.string() + " " +
                          LAB_BINARY_DIR + "/bin/gpt2_train " + args + " </dev/null";
  r.exit_code = exit_code_of(std::system(cmd.c_str()));
  r.out.resize(static_cast<size_t>(ranks));
  r.err.resize(static_cast<size_t>(ranks));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(outputs)) {
    const std::string folder = entry.path().parent_path().filename().string();
    if (!entry.is_regular_file() || folder.rfind("rank.", 0) != 0) continue;
    const size_t rank = std::stoul(folder.substr(5));
    if (rank >= r.out.size()) continue;
    (entry.path().filename() == "stdout" ? r.out : r.err)[rank] = read_file(entry.path().string());
  }
  return r;
}

// Expects the run to have succeeded, with every rank but 0 silent.
inline void expect_clean_run(const LaunchResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 0) << what << ": " << (r.err.empty() ? "" : r.err[0]) << (r.out.empty() ? "" : r.out[0]);
  for (size_t rank = 1; rank < r.out.size(); ++rank) {
    EXPECT_EQ(r.out[rank], "") << what << ": rank " << rank << " printed";
    EXPECT_EQ(r.err[rank], "") << what << ": rank " << rank << " printed";
  }
}

// The values of `key` in a log by step (training losses, validation losses).
inline std::map<int64_t, double> logged_by_step(const std::string& log, const std::string& key) {
  std::map<int64_t, double> out;
  for (const Json& r : read_log(log))
    if (r.contains(key)) out[r.at("step").as_int()] = r.at(key).as_number();
  return out;
}

// Every training and validation loss that `got` logs is the one `expected` logs at that step, within 1e-5
// relative; `got` logs the training losses of `steps` and at least one validation loss.
inline void expect_same_losses(const LaunchResult& expected, const LaunchResult& got, const std::vector<int64_t>& steps,
                               const std::string& what) {
  for (const char* key : {"loss", "val_loss"}) {
    const std::map<int64_t, double> want = logged_by_step(expected.log, key), have = logged_by_step(got.log, key);
    if (std::string(key) == "loss") {
      std::vector<int64_t> logged;
      for (const auto& [step, value] : have) logged.push_back(step);
      EXPECT_EQ(logged, steps) << what << ": steps logged";
    } else {
      EXPECT_FALSE(have.empty()) << what << ": no validation loss logged";
    }
    for (const auto& [step, value] : have) {
      ASSERT_TRUE(want.count(step)) << what << ": " << key << " of step " << step << " missing from " << expected.log;
      EXPECT_NEAR(value, want.at(step), 1e-5 * want.at(step)) << what << ": " << key << " at step " << step;
    }
  }
}

// A run's processes and the flags of its batch and layout.
struct Layout {
  std::string name;
  int ranks = 1;
  std::string flags;
};

// The layouts of one strategy (tensor, pipeline, data parallelism) and the one process with their global batch:
// tp 2; pp 2 with 2 micro-batches (one process accumulating 2); dp 2 with --batch 2 (one process --batch 4).
struct Strategy {
  Layout parallel, one_process;
};
inline Strategy tensor_parallel() {
  return {{"tp2", 2, "--batch 2 --tp 2"}, {"one_process", 1, "--batch 2"}};
}
inline Strategy pipeline_parallel() {
  return {{"pp2", 2, "--batch 2 --pp 2 --micro-batches 2"}, {"one_process", 1, "--batch 2 --total-batch-tokens 64"}};
}
inline Strategy data_parallel() {
  return {{"dp2", 2, "--batch 2 --dp 2"}, {"one_process", 1, "--batch 4"}};
}

// Runs `layout` up to step `steps`, with `extra` flags; its log is <dir>/<run>.jsonl.
inline LaunchResult run_layout(const std::string& dir, const std::string& run, const std::string& device,
                               const Layout& layout, int steps, const std::string& extra = "") {
  const LaunchResult r = launch_trainer(
      dir, run, layout.ranks,
      layout_run_flags(dir, device) + " " + layout.flags + " --steps " + std::to_string(steps) + " " + extra);
  expect_clean_run(r, run + " (" + layout.name + ")");
  return r;
}

// The text sampled at the end of a run (its log's "sample" record; "" when none).
inline std::string logged_sample(const LaunchResult& r) {
  for (const Json& record : read_log(r.log))
    if (record.contains("sample")) return record.at("sample").as_string();
  return "";
}

// A parallel layout as another run: `name` for its log, `extra` added to its flags.
inline Layout variant(const Layout& layout, const std::string& name, const std::string& extra) {
  return {name, layout.ranks, layout.flags + " " + extra};
}

// 4 steps of each parallel layout under mpirun log the losses and validation losses of the one process, and end
// with the same sample of 8 tokens (under tp and pp, drawn on rank 0 from the whole model gathered from the
// shards); the one process runs once for them all. Returns the parallel runs, in their order; each logs to
// <dir>/<its name>.jsonl, so their names differ.
inline std::vector<LaunchResult> expect_layouts_match_one_process(const std::string& dir, const std::string& device,
                                                                  const Layout& one_process,
                                                                  const std::vector<Layout>& parallel) {
  const LaunchResult one = run_layout(dir, "one_process", device, one_process, 4, "--sample-tokens 8");
  EXPECT_NE(logged_sample(one), "");
  std::vector<LaunchResult> runs;
  for (const Layout& layout : parallel) {
    runs.push_back(run_layout(dir, layout.name, device, layout, 4, "--sample-tokens 8"));
    expect_same_losses(one, runs.back(), {1, 2, 3, 4}, layout.name);
    EXPECT_EQ(logged_sample(runs.back()), logged_sample(one)) << layout.name << ": sample";
  }
  return runs;
}

// The same for the strategy's one parallel layout, with `extra` added to its flags; returns its run.
inline LaunchResult expect_strategy_matches_one_process(const std::string& dir, const std::string& device,
                                                        const Strategy& strategy, const std::string& extra = "") {
  return expect_layouts_match_one_process(dir, device, strategy.one_process,
                                          {variant(strategy.parallel, strategy.parallel.name, extra)})
      .front();
}

}  // namespace lab::testing
