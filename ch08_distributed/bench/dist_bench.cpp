// ch08_dist_bench, two modes (--mode):
//
// training: every parallel layout the world size allows, timed over a few training steps of one GPT-2, with
// the bytes each communicated, bandwidth, overlap, bubble and scaling efficiency (training_staircase.h):
//
//   mpirun -np 1 build/bin/ch08_dist_bench --mode training --model tiny --json np1.json
//   mpirun -np 2 --oversubscribe build/bin/ch08_dist_bench --mode training --model tiny --baseline np1.json
//
// collectives (the default): how fast the world communicator moves data, per collective and message size,
// measured the way nccl-tests does, so the numbers compare with theirs and with the link's speed:
//
//   time    the slowest rank's time for one call (each repeat starts after a barrier), median of repeats
//   algbw   payload bytes / time: for all_reduce the tensor, for reduce_scatter the whole input, for
//           all_gather the whole output (the traffic counters' payload, communicator.h)
//   busbw   algbw x bus_factor: 2(n-1)/n for all_reduce, (n-1)/n for reduce_scatter and all_gather; what
//           each rank's link carries with ring algorithms, comparable across rank counts
//
// Each collective is checked once at each size before it is timed (every rank contributes rank + 1, so
// each element must come out as the sum over ranks). The MPI backend's call check (one small all-reduce
// before each collective) is off by default, to time the collective alone; --call-check on times it in.
//
//   mpirun -np 4 --oversubscribe build/bin/ch08_dist_bench
//   mpirun -np 2 build/bin/ch08_dist_bench --ops all_reduce --max-bytes 67108864 --json allreduce.json
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ch08_distributed/bench/training_staircase.h"
#include "common/bench/result.h"
#include "common/bench/timer.h"
#include "common/comm/world.h"
#include "common/util/flags.h"
#include "common/util/main.h"
#ifdef LAB_WITH_MPI
#include "common/comm/mpi_communicator.h"
#endif

namespace lab {
namespace {

using comm::Communicator;
using comm::OpKind;

struct Settings {
  std::string mode = "collectives";
  std::string ops = "all_reduce,reduce_scatter,all_gather";
  std::string dtype = "f32";
  int64_t min_bytes = 1 << 10;
  int64_t max_bytes = 16 << 20;
  int64_t warmup = 3;
  int64_t repeats = 10;
  std::string call_check = "off";
  std::string json;
};

OpKind parse_op(const std::string& name) {
  for (OpKind kind : {OpKind::AllReduce, OpKind::ReduceScatter, OpKind::AllGather})
    if (name == comm::op_kind_name(kind)) return kind;
  fail(ErrorKind::InvalidArgument, "--ops: unknown collective '", name, "' (all_reduce, reduce_scatter, all_gather)");
}

std::vector<OpKind> parse_ops(const std::string& list) {
  std::vector<OpKind> ops;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) ops.push_back(parse_op(name));
  LAB_CHECK(!ops.empty(), InvalidArgument, "--ops is empty");
  return ops;
}

std::string bytes_str(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return cat(bytes >> 20, " MiB");
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return cat(bytes >> 10, " KiB");
  return cat(bytes, " B");
}

// The buffers of one collective with `payload` bytes: the tensor it reduces, or the whole input of a
// reduce-scatter, or the whole output of an all-gather, and the other side's block.
struct Buffers {
  Tensor input, output;
};

Buffers make_buffers(OpKind op, int64_t elements, DType dtype, int ranks) {
  const int64_t block = elements / ranks;
  switch (op) {
    case OpKind::AllReduce: return {Tensor::zeros({elements}, dtype), Tensor::zeros({elements}, dtype)};
    case OpKind::ReduceScatter: return {Tensor::zeros({elements}, dtype), Tensor::zeros({block}, dtype)};
    default: return {Tensor::zeros({block}, dtype), Tensor::zeros({elements}, dtype)};
  }
}

void run_op(Communicator& comm, OpKind op, const Buffers& b) {
  switch (op) {
    case OpKind::AllReduce: comm.all_reduce(b.input, b.output, comm::ReduceOp::Sum); return;
    case OpKind::ReduceScatter: comm.reduce_scatter(b.input, b.output, comm::ReduceOp::Sum); return;
    default: comm.all_gather(b.input, b.output); return;
  }
}

// Every rank contributes rank + 1: a reduction gives n(n+1)/2 everywhere, a gather gives block r = r + 1.
void check_once(Communicator& comm, OpKind op, const Buffers& b) {
  const int n = comm.size();
  b.input.copy_from(
      Tensor::from_floats(std::vector<float>(b.input.numel(), static_cast<float>(comm.rank() + 1)), b.input.shape())
          .to_dtype(b.input.dtype()));
  run_op(comm, op, b);
  const std::vector<float> got = b.output.to_floats();
  const int64_t block = op == OpKind::AllGather ? b.input.numel() : 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float expected = op == OpKind::AllGather ? static_cast<float>(i / block + 1) : n * (n + 1) / 2.0f;
    LAB_CHECK(got[i] == expected, Internal, comm::op_kind_name(op), " of ", b.output.nbytes(), " bytes gave ", got[i],
              " at element ", i, ", expected ", expected);
  }
}

// The slowest rank's seconds for each repeat.
std::vector<double> time_op(Communicator& comm, OpKind op, const Buffers& b, const Settings& s) {
  std::vector<double> seconds;
  for (int64_t i = 0; i < s.warmup + s.repeats; ++i) {
    comm.barrier();
    const bench::Timer timer;
    run_op(comm, op, b);
    Tensor slowest = Tensor::from_floats(std::vector<float>{static_cast<float>(timer.seconds())}, {1});
    comm.all_reduce(slowest, comm::ReduceOp::Max);
    if (i >= s.warmup) seconds.push_back(slowest.item());
  }
  return seconds;
}

void write_result(const bench::BenchResult& result, const std::string& path, bool printer) {
  if (!printer || path.empty()) return;
  result.write(path);
  std::printf("wrote %s\n", path.c_str());
}

int run(int argc, char** argv) {
  Settings s;
  ch08::TrainingBenchSettings training;
  Flags flags("ch08_dist_bench",
              "Training steps of every parallel layout, or the world communicator's collectives: time, bytes, "
              "algorithm and bus bandwidth.");
  flags.add_choice("mode", &s.mode, {"collectives", "training"}, "what to measure");
  flags.add_string("ops", &s.ops, "comma-separated collectives: all_reduce, reduce_scatter, all_gather");
  flags.add_choice("dtype", &s.dtype, {"f32", "bf16"}, "element type");
  flags.add_int("min-bytes", &s.min_bytes, "smallest payload; sizes go up by 4x", 4);
  flags.add_int("max-bytes", &s.max_bytes, "largest payload", 4, int64_t{1} << 32);
  flags.add_int("warmup", &s.warmup, "untimed calls per size", 0);
  flags.add_int("repeats", &s.repeats, "timed calls per size", 1);
  flags.add_choice("call-check", &s.call_check, {"off", "on"},
                   "the MPI backend's check that all ranks make the same call");
  flags.add_string("json", &s.json, "write the bench result here (rank 0)");
  training.register_flags(flags);
  if (!flags.parse(argc, argv)) return 0;
  if (!s.json.empty()) bench::BenchResult::check_destination(s.json);
  const std::vector<OpKind> ops = parse_ops(s.ops);
  const DType dtype = parse_dtype(s.dtype);
  LAB_CHECK(s.min_bytes <= s.max_bytes, InvalidArgument, "--min-bytes ", s.min_bytes, " is above --max-bytes ",
            s.max_bytes);

  comm::World world;
  Communicator& comm = world.comm();
  const int n = comm.size();
  const bool printer = comm.rank() == 0;
#ifdef LAB_WITH_MPI
  if (auto* mpi = dynamic_cast<comm::MpiCommunicator*>(&comm)) mpi->set_verify_calls(s.call_check == "on");
#endif
  bench::BenchResult result = bench::BenchResult::start("ch08_dist_bench", argc, argv);
  if (n > 1) result.command = cat("mpirun -np ", n, " ", result.command);  // re-runnable as recorded
  if (s.mode == "training") {
    training.warmup = s.warmup;
    const staircase::StaircaseReport report = ch08::run_training_staircase(comm, training, result);
    if (printer) std::fputs(report.table().c_str(), stdout);
    write_result(result, s.json, printer);
    return 0;
  }
  result.describe_column("us", "us", bench::Better::Lower);
  result.describe_column("algbw_GBps", "GB/s", bench::Better::Higher);
  result.describe_column("busbw_GBps", "GB/s", bench::Better::Higher);
  if (printer) {
    std::printf("%d ranks, %s backend, %s, call check %s%s\n", n, comm.backend().c_str(), s.dtype.c_str(),
                s.call_check.c_str(), n == 1 ? " (one rank moves nothing: run under mpirun)" : "");
    std::printf("%-15s %10s %12s %12s %12s %12s %12s\n", "collective", "payload", "us median", "us min", "us max",
                "algbw GB/s", "busbw GB/s");
  }

  // Payloads are whole blocks of whole elements on every rank.
  const int64_t granule = n * static_cast<int64_t>(dtype_size(dtype));
  for (OpKind op : ops) {
    std::vector<double> busbw_samples;  // of the latest (finally: the largest) payload, the headline metric
    for (int64_t want = s.min_bytes; want <= s.max_bytes; want *= 4) {
      const int64_t payload = std::max(granule, want / granule * granule);
      const Buffers buffers = make_buffers(op, payload / static_cast<int64_t>(dtype_size(dtype)), dtype, n);
      check_once(comm, op, buffers);
      const std::vector<double> seconds = time_op(comm, op, buffers, s);
      const bench::Summary time = bench::summarize(seconds);
      const double algbw = payload / time.median / 1e9;
      const double busbw = algbw * comm::bus_factor(op, n);
      busbw_samples.clear();
      for (double t : seconds) busbw_samples.push_back(payload / t / 1e9 * comm::bus_factor(op, n));
      const std::string name = cat(comm::op_kind_name(op), " ", bytes_str(payload));
      result.add_row(Json(Json::Object{{"case", name},
                                       {"ranks", n},
                                       {"bytes", payload},
                                       {"us", time.median * 1e6},
                                       {"us_min", time.min * 1e6},
                                       {"us_max", time.max * 1e6},
                                       {"algbw_GBps", algbw},
                                       {"busbw_GBps", busbw}}));
      if (printer)
        std::printf("%-15s %10s %12.1f %12.1f %12.1f %12.3f %12.3f\n", comm::op_kind_name(op),
                    bytes_str(payload).c_str(), time.median * 1e6, time.min * 1e6, time.max * 1e6, algbw, busbw);
    }
    result.add_metric(cat(comm::op_kind_name(op), "_busbw_GBps"), busbw_samples, "GB/s", bench::Better::Higher);
  }
  write_result(result, s.json, printer);
  return 0;
}

}  // namespace
}  // namespace lab

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, lab::run);
}
