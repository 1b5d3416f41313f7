// What the trainer tests share: learnable synthetic shards, the options of a tiny run, the JSON log reader,
// and the real gpt2_train (and gpt2_step_bench) run as processes, synchronously or in the background.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ch10_gpt2/train_options.h"
#include "common/io/files.h"
#include "common/io/shards.h"
#include "common/util/json.h"

namespace lab::testing {

// A learnable stream: a repeating pattern of 97 distinct token ids.
inline void write_pattern_shard(const std::string& path, int64_t n, int offset) {
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>(((i + offset) % 97) * 311 % 50257);
  write_shard(path, tokens);
}

// Writes the shards of a tiny run into `dir`.
inline void write_tiny_shards(const std::string& dir) {
  write_pattern_shard(dir + "/train_000000.bin", 6000, 0);
  write_pattern_shard(dir + "/train_000001.bin", 3000, 5);
  write_pattern_shard(dir + "/val_000000.bin", 2000, 11);
}

inline TrainOptions tiny_options(const std::string& dir) {
  write_tiny_shards(dir);
  TrainOptions o;
  o.data_train = dir + "/train_*.bin";
  o.data_val = dir + "/val_000000.bin";
  o.model = "tiny";
  o.device = "cpu";
  o.batch = 2;
  o.seq = 16;
  o.steps = 6;
  o.lr = 1e-2;
  o.warmup_steps = 2;
  o.eval_every = 3;
  o.val_batches = 4;
  o.sample_tokens = 0;
  return o;
}

// The same tiny run as command-line flags (shards written into `dir`), for the gpt2_train process.
inline std::string tiny_flags(const std::string& dir) {
  write_tiny_shards(dir);
  return "--data-train '" + dir + "/train_*.bin' --data-val " + dir +
         "/val_000000.bin --model tiny --device cpu --batch 2 --seq 16 --lr 0.01 --warmup-steps 2 "
         "--eval-every 0 --sample-tokens 0 --threads 1";
}

inline std::vector<Json> read_log(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

// The training losses of a log, in order.
inline std::vector<double> logged_losses(const std::string& path) {
  std::vector<double> losses;
  for (const Json& r : read_log(path))
    if (r.contains("loss")) losses.push_back(r.at("loss").as_number());
  return losses;
}

struct ProcessResult {
  int exit_code = -1;  // the exit status, or 128 + the signal that killed the process
  std::string out, err;
};

inline int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

inline std::string scratch_output(const std::string& name) {
  const std::string dir = std::string(LAB_BINARY_DIR) + "/test_scratch/process_output";
  make_directories(dir);
  return dir + "/" + name + "." + std::to_string(::getpid());
}

// Runs build/bin/<program> with `args` (shell words) to completion.
inline ProcessResult run_program(const std::string& program, const std::string& args) {
  const std::string out = scratch_output("stdout"), err = scratch_output("stderr");
  const std::string cmd =
      std::string(LAB_BINARY_DIR) + "/bin/" + program + " " + args + " >" + out + " 2>" + err + " </dev/null";
  ProcessResult r;
  r.exit_code = exit_code_of(std::system(cmd.c_str()));
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

inline ProcessResult run_gpt2_train(const std::string& args) {
  return run_program("gpt2_train", args);
}

// gpt2_train running in the background (through /bin/sh, for the shell words of `args`; exec keeps the pid),
// to be signalled while it trains.
class BackgroundTrainer {
 public:
  explicit BackgroundTrainer(const std::string& args)
      : out_(scratch_output("bg_stdout")), err_(scratch_output("bg_stderr")) {
    const std::string cmd =
        "exec " + std::string(LAB_BINARY_DIR) + "/bin/gpt2_train " + args + " >" + out_ + " 2>" + err_ + " </dev/null";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~BackgroundTrainer() {
    if (pid_ > 0 && !finished_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  BackgroundTrainer(const BackgroundTrainer&) = delete;
  BackgroundTrainer& operator=(const BackgroundTrainer&) = delete;

  // Waits until its standard output or error contains `text`; false after `seconds` or when the process ended
  // first.
  bool wait_for_output(const std::string& text, double seconds = 120) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    auto has = [&](const std::string& path) {
      return file_exists(path) && read_file(path).find(text) != std::string::npos;
    };
    while (std::chrono::steady_clock::now() < deadline) {
      if (has(out_) || has(err_)) return true;
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        finished_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  ProcessResult wait() {
    if (!finished_) ::waitpid(pid_, &status_, 0);
    finished_ = true;
    return {exit_code_of(status_), read_file(out_), read_file(err_)};
  }

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool finished_ = false;
};

}  // namespace lab::testing
