// ch05_loader_bench: what each of chapter 5's loader stages buys, measured two ways in one run, with and
// without a simulated slow source (common/data/slow_source.h).
//
//   1. Loader throughput: the tokens per second a stage hands out when its consumer asks as fast as it
//      can, over synthetic shards, with a warm page cache and with a cold one. "Cold" drops the shards'
//      pages with posix_fadvise(POSIX_FADV_DONTNEED) before each repeat, then checks with mincore() how
//      much really left the cache, and says so when the machine kept the pages.
//   2. Data-stall fraction of a training step: a small GPT-2 trained by the trainer's own step and loop
//      (common/train), once per stage; the stall is the time a step waits for its batch (TrainStepResult's
//      data time, which includes the copy to the device; gpt2_train logs it as data_ms) divided by the step
//      time, over the steps after a few warm-up steps.
//      The step time is reported beside it: reader threads that burn CPU can slow the step itself down
//      on a machine with few cores, and that cost belongs in the table too.
//
// The default slow source is latency dominated, as remote storage is: every batch read waits 100 ms (an
// object-store or network-file-system request) and costs 1 ms of CPU (decoding). A synchronous loader
// pays the 101 ms inside every step; the tiny model's step on a 2-core CPU is of the same order, so the
// step stalls for a third of its time or more. A reader thread that mostly sleeps costs next to no CPU,
// so the background stages use 4 of them on 2 cores: together they deliver a batch about every 25 ms,
// ahead of the step. Raise --slow-preprocess-us to see the other regime, where readers compete with the
// training step for the cores.
//
// Everything it writes (the synthetic shards, about 64 MB by default) goes into a fresh
// directory made under --dir, removed at the end, also when the run fails, unless --keep-files is given.
//
//   ch05_loader_bench                          # defaults: about 70 s on 2 idle cores
//   ch05_loader_bench --quick                  # small shards, few batches and steps: seconds, same table
//   ch05_loader_bench --json loaders.json      # also writes the bench result (rows per stage x slow source)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include "ch05_data/loaders/make_loader.h"
#include "common/bench/result.h"
#include "common/bench/timer.h"
#include "common/core/device.h"
#include "common/core/parallel.h"
#include "common/io/files.h"
#include "common/io/shards.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/optim/lr_schedule.h"
#include "common/train/training_loop.h"
#include "common/util/flags.h"
#include "common/util/main.h"
#include "common/util/rng.h"

namespace lab {
namespace {

struct Settings {
  std::string dir = std::string(LAB_BINARY_DIR) + "/loader_bench";  // the scratch directory is made in here
  std::string scratch;  // the run's own directory inside `dir`, made at start
  bool keep_files = false;
  bool quick = false;
  std::string device = "auto";
  int64_t shards = 8;
  int64_t shard_tokens = 4 << 20;
  int64_t batch = 16, seq = 1024;  // throughput batches
  int64_t slow_batches = 24;       // batches per throughput repeat with the slow source (without: one epoch)
  int64_t repeats = 3;
  int64_t workers = 4, depth = 4;
  int64_t slow_read_us = 100'000, slow_preprocess_us = 1'000;
  std::string model = "tiny";
  int64_t train_batch = 4, train_seq = 64, steps = 24, warmup_steps = 4, threads = 0;
  std::string json;
};

// --quick: the settings of a short run, for the flags the command line did not give.
void apply_quick_settings(Settings& s, const Flags& flags) {
  auto unless_given = [&](const char* name, int64_t& field, int64_t quick) {
    if (!flags.was_set(name)) field = quick;
  };
  unless_given("shards", s.shards, 2);
  unless_given("shard-tokens", s.shard_tokens, 1 << 18);
  unless_given("seq", s.seq, 256);
  unless_given("slow-batches", s.slow_batches, 6);
  unless_given("repeats", s.repeats, 1);
  unless_given("slow-read-us", s.slow_read_us, 20'000);
  unless_given("steps", s.steps, 6);
  unless_given("warmup-steps", s.warmup_steps, 2);
}

// A fresh directory (mkdtemp) for everything the bench writes. It is removed with its contents when the run
// ends, also by an error, unless it is kept: every file in it was written by this program.
class ScratchDirectory {
 public:
  ScratchDirectory(const std::string& parent, bool keep) : keep_(keep) {
    make_directories(parent);
    std::string pattern = parent + "/run.XXXXXX";
    LAB_CHECK(::mkdtemp(pattern.data()), Io, "cannot create a scratch directory in '", parent,
              "': ", std::strerror(errno));
    path_ = pattern;
  }
  ~ScratchDirectory() {
    if (keep_) return;
    std::error_code ignored;  // a destructor must not throw; what is left is in a directory of our own
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool keep_;
};

// ---------------------------------------------------------------- data and page cache

std::vector<std::string> write_bench_shards(const Settings& s) {
  std::vector<std::string> paths;
  Rng rng(5);
  std::vector<uint16_t> tokens(static_cast<size_t>(s.shard_tokens));
  for (int64_t i = 0; i < s.shards; ++i) {
    for (uint16_t& t : tokens) t = static_cast<uint16_t>(rng.below(50257));
    char name[32];
    std::snprintf(name, sizeof(name), "/bench_%06lld.bin", static_cast<long long>(i));
    paths.push_back(s.scratch + name);
    write_shard(paths.back(), tokens);  // fsynced: clean pages, which DONTNEED can drop
  }
  return paths;
}

// Fraction of the files' pages in the page cache, from mincore() on a fresh mapping.
double cached_fraction(const std::vector<std::string>& paths) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t cached = 0, total = 0;
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    LAB_CHECK(fd >= 0, Io, "cannot open '", path, "'");
    const size_t bytes = static_cast<size_t>(file_size(path));
    void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    LAB_CHECK(map != MAP_FAILED, Io, "cannot map '", path, "'");
    std::vector<unsigned char> resident((bytes + page - 1) / page);
    const int rc = ::mincore(map, bytes, resident.data());
    ::munmap(map, bytes);
    LAB_CHECK(rc == 0, Io, "mincore failed on '", path, "'");
    for (unsigned char r : resident) cached += r & 1;
    total += resident.size();
  }
  return total ? static_cast<double>(cached) / static_cast<double>(total) : 0.0;
}

// Asks the kernel to drop the files' cached pages; returns the fraction still cached afterwards.
double drop_page_cache(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    LAB_CHECK(fd >= 0, Io, "cannot open '", path, "'");
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  return cached_fraction(paths);
}

// ---------------------------------------------------------------- measurements

LoaderOptions loader_options(const Settings& s, int64_t batch, int64_t seq, bool slow, std::set<std::string>& notes) {
  LoaderOptions o;
  o.batch = batch;
  o.seq = seq;
  o.workers = static_cast<int>(s.workers);
  o.depth = static_cast<int>(s.depth);
  if (slow) o.slow = {s.slow_read_us, s.slow_preprocess_us};
  o.log = [&notes](const std::string& line) { notes.insert(line); };
  return o;
}

struct Throughput {
  double warm = 0, cold = 0;  // tokens/s, medians over repeats
  double cold_cached = 0;     // largest fraction of pages still cached after a drop
  std::string ran_as;
};

// Tokens/s of one pass of `batches` batches, loader construction (opening the shards) included.
double one_pass(const std::string& stage, const std::vector<std::string>& paths, const LoaderOptions& o,
                int64_t batches, Device device, std::string& ran_as) {
  Tensor inputs, targets;
  bench::Timer timer;
  const std::unique_ptr<BatchLoader> loader = ch05::make_loader(stage, paths, o, device);
  for (int64_t i = 0; i < batches; ++i) loader->next(inputs, targets);
  synchronize(loader->device());
  const double seconds = timer.seconds();
  ran_as = loader->name();
  return static_cast<double>(batches * o.batch * o.seq) / seconds;
}

Throughput measure_throughput(const Settings& s, const std::string& stage, const std::vector<std::string>& paths,
                              bool slow, Device device, std::set<std::string>& notes) {
  const LoaderOptions o = loader_options(s, s.batch, s.seq, slow, notes);
  const int64_t per_epoch = BatchPlan(paths, o).batches_per_epoch();
  const int64_t batches = slow ? std::min(s.slow_batches, per_epoch) : per_epoch;
  Throughput t;
  std::vector<double> warm, cold;
  one_pass(stage, paths, o, batches, device, t.ran_as);  // warms the cache (and the allocator)
  for (int64_t r = 0; r < s.repeats; ++r) warm.push_back(one_pass(stage, paths, o, batches, device, t.ran_as));
  for (int64_t r = 0; r < s.repeats; ++r) {
    t.cold_cached = std::max(t.cold_cached, drop_page_cache(paths));
    cold.push_back(one_pass(stage, paths, o, batches, device, t.ran_as));
  }
  t.warm = bench::median(warm);
  t.cold = bench::median(cold);
  return t;
}

struct Stall {
  std::vector<double> step_ms;  // per counted step
  double data_ms = 0;           // mean wait per counted step
  double fraction = 0;          // total wait / total step time
};

// Trains `s.model` (weights from a fixed seed) for the warm-up and the counted steps through common/train's
// loop, on batches from the given stage over the bench's shards, as gpt2_train does.
Stall measure_stall(const Settings& s, const std::string& stage, bool slow) {
  const Device device = parse_device_or_auto(s.device);
  GPT2 model(GPT2Config::from_name(s.model), device);
  model.init_weights(1);
  AdamW optimizer(model.parameters(), AdamWConfig{});
  TrainStep step(model, optimizer, TrainStepConfig{1, 1.0, false});
  LoaderOptions lo;
  lo.batch = s.train_batch;
  lo.seq = s.train_seq;
  lo.depth = static_cast<int>(s.depth);
  lo.workers = static_cast<int>(s.workers);
  if (slow) lo.slow = {s.slow_read_us, s.slow_preprocess_us};
  lo.log = [](const std::string&) {};  // a stage's fallback is reported by the throughput part already
  const std::unique_ptr<BatchLoader> loader =
      ch05::make_loader(stage, expand_shard_pattern(s.scratch + "/bench_*.bin"), lo, device);
  Tensor x, y;
  LrSchedule constant;
  constant.kind = LrSchedule::Kind::Constant;
  TrainingLoop loop(
      step,
      [&] {
        loader->next(x, y);
        return MicroBatch{x, y};
      },
      constant);
  Stall stall;
  double data_total = 0, step_total = 0;
  loop.run(0, s.warmup_steps + s.steps, [&](int64_t i, const TrainStepResult& r) {
    if (i < s.warmup_steps) return;
    stall.step_ms.push_back(r.seconds * 1e3);
    data_total += r.data_seconds;
    step_total += r.seconds;
  });
  stall.data_ms = data_total * 1e3 / static_cast<double>(stall.step_ms.size());
  stall.fraction = data_total / step_total;
  return stall;
}

// ---------------------------------------------------------------- the run

int run(int argc, char** argv) {
  Settings s;
  const char* about =
      "Loader throughput (warm and cold page cache) and the data-stall fraction of a training step, for every loader "
      "stage, with and without a simulated slow source.";
  Flags flags("ch05_loader_bench", about);
  flags.add_string("dir", &s.dir, "where to make the scratch directory for the shards (removed at the end)");
  flags.add_bool("keep-files", &s.keep_files, "keep the scratch directory (the shards)");
  flags.add_bool("quick", &s.quick,
                 "a short run of a few seconds: 2 shards of 256K tokens, T=256, 6 slow batches, 1 repeat, 20 ms "
                 "latency, 6 steps after 2 warm-up steps (flags given explicitly still apply)");
  flags.add_string("device", &s.device, "cpu, cuda, cuda:N or auto (where batches go, and the trainer runs)");
  flags.add_int("shards", &s.shards, "synthetic shards", 1, 1024);
  flags.add_int("shard-tokens", &s.shard_tokens, "tokens per shard", 1024, int64_t{1} << 30);
  flags.add_int("batch", &s.batch, "throughput: batch size B", 1, 1 << 16);
  flags.add_int("seq", &s.seq, "throughput: sequence length T", 1, 1 << 20);
  flags.add_int("slow-batches", &s.slow_batches, "throughput: batches per repeat with the slow source", 1,
                int64_t{1} << 30);
  flags.add_int("repeats", &s.repeats, "throughput: repeats per stage and cache state (median reported)", 1, 100);
  flags.add_int("workers", &s.workers, "reader threads of the background stages", 1, 256);
  flags.add_int("depth", &s.depth, "batches the background stages read ahead", 1, 1024);
  flags.add_int("slow-read-us", &s.slow_read_us, "slow source: latency per batch read (us)", 0, 60'000'000);
  flags.add_int("slow-preprocess-us", &s.slow_preprocess_us, "slow source: CPU time per batch (us)", 0, 60'000'000);
  flags.add_string("model", &s.model, "trainer: model size (small, tiny, d12, ...)");
  flags.add_int("train-batch", &s.train_batch, "trainer: batch size B", 1, 1 << 16);
  flags.add_int("train-seq", &s.train_seq, "trainer: sequence length T", 1, 1 << 20);
  flags.add_int("steps", &s.steps, "trainer: steps counted per stage", 1, 100000);
  flags.add_int("warmup-steps", &s.warmup_steps, "trainer: steps run first and not counted", 0, 100000);
  flags.add_int("threads", &s.threads, "trainer: CPU threads (0: all cores)", 0, 4096);
  flags.add_string("json", &s.json, "write the bench result here (JSON)");
  if (!flags.parse(argc, argv)) return 0;
  if (s.quick) apply_quick_settings(s, flags);
  if (!s.json.empty()) bench::BenchResult::check_destination(s.json);  // before minutes of measurements
  if (s.threads > 0) set_num_threads(static_cast<int>(s.threads));
  const Device device = parse_device_or_auto(s.device);

  bench::BenchResult result = bench::BenchResult::start("ch05_loader", argc, argv);
  std::printf("ch05_loader_bench on %s; batches go to %s\n", result.machine.summary().c_str(), device.str().c_str());
  std::printf(
      "slow source: %lld us latency + %lld us CPU per batch read; background stages: %lld reader "
      "thread(s), depth %lld\n\n",
      static_cast<long long>(s.slow_read_us), static_cast<long long>(s.slow_preprocess_us),
      static_cast<long long>(s.workers), static_cast<long long>(s.depth));
  std::fflush(stdout);
  const ScratchDirectory scratch(s.dir, s.keep_files);
  s.scratch = scratch.path();
  const std::vector<std::string> paths = write_bench_shards(s);
  const std::vector<std::string>& stages = ch05::loader_stages();

  std::set<std::string> notes;
  std::map<std::pair<std::string, bool>, Throughput> throughput;
  std::map<std::pair<std::string, bool>, Stall> stall;
  double cold_cached = 0;
  for (const bool slow : {false, true})
    for (const std::string& stage : stages) {
      throughput[{stage, slow}] = measure_throughput(s, stage, paths, slow, device, notes);
      cold_cached = std::max(cold_cached, throughput[{stage, slow}].cold_cached);
    }
  for (const bool slow : {false, true})
    for (const std::string& stage : stages) stall[{stage, slow}] = measure_stall(s, stage, slow);

  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  std::printf(
      "loader throughput: %lld shards x %lld tokens, batches of %lld x %lld, median of %lld repeats "
      "(an epoch each without the slow source, %lld batches with it)\n",
      static_cast<long long>(s.shards), static_cast<long long>(s.shard_tokens), static_cast<long long>(s.batch),
      static_cast<long long>(s.seq), static_cast<long long>(s.repeats), static_cast<long long>(s.slow_batches));
  if (cold_cached < 0.05)
    std::printf("cold cache: posix_fadvise(DONTNEED) before each repeat; at most %.1f%% of the pages stayed cached\n",
                100 * cold_cached);
  else
    std::printf(
        "cold cache: NOT achieved on this machine: up to %.1f%% of the pages stayed cached after "
        "posix_fadvise(DONTNEED), so the cold column is partly warm\n",
        100 * cold_cached);
  std::printf(
      "data stall: training steps of GPT-2 %s (the trainer's step and loop), B=%lld T=%lld on %s, %lld steps counted "
      "after %lld "
      "warm-up steps; stall = time waiting for the batch / step time\n\n",
      s.model.c_str(), static_cast<long long>(s.train_batch), static_cast<long long>(s.train_seq), device.str().c_str(),
      static_cast<long long>(s.steps), static_cast<long long>(s.warmup_steps));
  std::printf("%-9s %-9s %-5s | %11s %6s %11s %6s | %8s %13s %6s %8s %6s\n", "stage", "ran as", "slow", "warm tok/s",
              "x sync", "cold tok/s", "x sync", "step ms", "(min-max)", "x sync", "data ms", "stall");

  result.describe_column("tokens_per_s", "tokens/s", bench::Better::Higher);
  result.describe_column("tokens_per_s_cold", "tokens/s", bench::Better::Higher);
  result.describe_column("stall_fraction", "fraction", bench::Better::Lower);
  result.describe_column("step_ms", "ms", bench::Better::Lower);
  result.describe_column("data_ms", "ms", bench::Better::Lower);
  for (const bool slow : {false, true}) {
    const Throughput& base_t = throughput[{"sync", slow}];
    const double base_step = bench::median(stall[{"sync", slow}].step_ms);
    for (const std::string& stage : stages) {
      const Throughput& t = throughput[{stage, slow}];
      const Stall& st = stall[{stage, slow}];
      const bench::Summary step = bench::summarize(st.step_ms);
      const double step_ms = step.median;
      const std::string range = cat(static_cast<int>(step.min + 0.5), "-", static_cast<int>(step.max + 0.5));
      std::printf("%-9s %-9s %-5s | %11.3g %6.2f %11.3g %6.2f | %8.1f %13s %6.2f %8.2f %5.1f%%\n", stage.c_str(),
                  t.ran_as.c_str(), slow ? "on" : "off", t.warm, t.warm / base_t.warm, t.cold, t.cold / base_t.cold,
                  step_ms, ("(" + range + ")").c_str(), step_ms / base_step, st.data_ms, 100 * st.fraction);
      Json row = Json::object();
      row.set("row", cat(stage, slow ? ", slow source" : ""));
      row.set("stage", stage);
      row.set("slow_source", slow);
      row.set("ran_as", t.ran_as);
      row.set("tokens_per_s", t.warm);
      row.set("tokens_per_s_cold", t.cold);
      row.set("stall_fraction", st.fraction);
      row.set("step_ms", step_ms);
      row.set("data_ms", st.data_ms);
      result.add_row(std::move(row));
      result.add_metric(cat("step_ms_", stage, slow ? "_slow" : ""), st.step_ms, "ms", bench::Better::Lower);
    }
  }
  if (!s.json.empty()) {
    result.write(s.json);
    std::printf("\nresult written to %s\n", s.json.c_str());
  }
  if (s.keep_files)
    std::printf("kept the shards: %s\n", s.scratch.c_str());
  else
    std::printf("removing the scratch directory %s (the shards; --keep-files keeps it)\n", s.scratch.c_str());
  return 0;
}

}  // namespace
}  // namespace lab

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, lab::run);
}
