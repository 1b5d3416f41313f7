// ch08_dist_bench's training staircase at a tiny size under mpirun -np 2: every layout of two ranks runs, and
// its JSON (written and read back) holds the bytes theory predicts where theory is exact: the gradients of
// the naive data-parallel stage (one all-reduce per tensor: exactly the parameters), the pipeline's boundary
// activations and gradients (exactly M micro-batches of b x T x C each way), and at least theory's
// all-reduces of tensor parallelism; the bubble's theory (P-1)/(M+P-1) and the schedules' micro-batches in
// flight; the overlap fraction a fraction; a --baseline of another workload refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "ch08_distributed/bench/training_staircase.h"
#include "common/nn/gpt2.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/common/expect_error.h"

namespace lab::ch08 {
namespace {

TrainingBenchSettings tiny_settings() {
  TrainingBenchSettings s;
  s.model = "tiny";
  s.batch = 2;
  s.seq = 8;
  s.micro_batches = 2;
  s.steps = 1;
  s.warmup = 0;
  return s;
}

const Json& row_named(const bench::BenchResult& result, const std::string& rung) {
  for (const Json& row : result.rows)
    if (row.at("rung").as_string() == rung) return row;
  ADD_FAILURE() << "no row " << rung;
  return result.rows.front();
}

TEST(DistBenchTraining, RowsHoldTheBytesOfTheory) {
  const std::unique_ptr<comm::Communicator> world = testing::fresh_communicator();
  ASSERT_EQ(world->size(), 2) << "run under mpirun -np 2";
  const TrainingBenchSettings s = tiny_settings();
  bench::BenchResult written = bench::BenchResult::start("ch08_dist_bench", 0, nullptr);
  run_training_staircase(*world, s, written);
  const std::string path = cat(::testing::TempDir(), "ch08_dist_bench_rank", world->rank(), ".json");
  written.write(path);
  const bench::BenchResult result = bench::BenchResult::read(path);
  std::remove(path.c_str());

  std::vector<std::string> rungs;
  for (const Json& row : result.rows) {
    rungs.push_back(row.at("rung").as_string());
    EXPECT_EQ(row.at("status").as_string(), "ok") << rungs.back();
    EXPECT_GT(row.at("step_ms_median").as_number(), 0) << rungs.back();
    EXPECT_TRUE(row.at("scaling_efficiency").is_null()) << "no --baseline";
  }
  EXPECT_EQ(rungs,
            (std::vector<std::string>{"dp2 naive", "dp2 bucketed", "dp2 overlap", "tp2", "pp2 gpipe", "pp2 1f1b"}));
  EXPECT_TRUE(row_named(result, "dp2 naive").at("step_ms_vs_previous").is_null());
  EXPECT_TRUE(row_named(result, "dp2 bucketed").at("step_ms_vs_previous").is_number());

  // Data parallelism: the naive stage all-reduces each gradient tensor once, and with 2 ranks the ring's
  // factor 2(n-1)/n is 1, so the gradient bytes are theory's exactly; the buckets add only the alignment
  // padding between tensors; the other all-reduce bytes are the loss's average (one float).
  const GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  int64_t parameters = 0;
  for (const ParamInfo& p : model.parameters().infos()) parameters += p.numel();
  for (const char* rung : {"dp2 naive", "dp2 bucketed", "dp2 overlap"}) {
    const Json& row = row_named(result, rung);
    EXPECT_EQ(row.at("theory_link_bytes").as_number(), static_cast<double>(parameters * 4)) << rung;
    const double grad_bytes = row.at("grad_bytes").as_number();
    if (std::string(rung) == "dp2 naive") {
      EXPECT_EQ(grad_bytes, static_cast<double>(parameters * 4));
    } else {
      EXPECT_EQ(grad_bytes, static_cast<double>(model.parameters().numel() * 4)) << rung;
    }
    EXPECT_EQ(row.at("all_reduce_bytes").as_number(), grad_bytes + 4) << rung;
    EXPECT_EQ(row.at("link_bytes").as_number(), grad_bytes + 4) << rung;
    EXPECT_EQ(row.at("send_bytes").as_number(), 0) << rung;
    EXPECT_TRUE(row.at("busbw_GBps").is_number()) << rung;
    const double overlap = row.at("overlap_fraction").as_number();
    EXPECT_GE(overlap, 0) << rung;
    EXPECT_LE(overlap, 1) << rung;
    if (std::string(rung) != "dp2 overlap") {
      EXPECT_EQ(overlap, 0) << rung << ": nothing runs during backward";
    }
  }

  // Tensor parallelism: 4 all-reduces of b T C floats per block and micro-batch, and more (the embedding's
  // and the cross-entropy's, the norm's); no gradient reduction with one data-parallel rank.
  const GPT2Config tiny = GPT2Config::from_name("tiny");
  const double activation = static_cast<double>(s.batch * s.seq * tiny.n_embd * 4);
  const Json& tp = row_named(result, "tp2");
  EXPECT_EQ(tp.at("theory_link_bytes").as_number(), 4.0 * tiny.n_layer * s.micro_batches * activation);
  EXPECT_GT(tp.at("link_bytes").as_number(), tp.at("theory_link_bytes").as_number());
  EXPECT_TRUE(tp.at("grad_bytes").is_null());

  // Pipeline parallelism: rank 0 (the first stage) sends each micro-batch's activation and receives its
  // gradient, exactly; the bubble's theory for P = 2, M = 2 is 1/3.
  for (const char* rung : {"pp2 gpipe", "pp2 1f1b"}) {
    const Json& row = row_named(result, rung);
    EXPECT_EQ(row.at("send_bytes").as_number(), s.micro_batches * activation) << rung;
    EXPECT_EQ(row.at("recv_bytes").as_number(), s.micro_batches * activation) << rung;
    EXPECT_EQ(row.at("theory_link_bytes").as_number(), 2 * s.micro_batches * activation) << rung;
    EXPECT_DOUBLE_EQ(row.at("bubble_theory").as_number(), 1.0 / 3.0) << rung;
    EXPECT_GE(row.at("bubble").as_number(), 0) << rung;
    EXPECT_LT(row.at("bubble").as_number(), 1) << rung;
  }
  // Each rank's row is its own view (the bench writes rank 0's): stage r of P holds at most P - r
  // micro-batches in flight under 1F1B, all M under GPipe.
  EXPECT_EQ(row_named(result, "pp2 gpipe").at("peak_live").as_int(), s.micro_batches);
  EXPECT_EQ(row_named(result, "pp2 1f1b").at("peak_live").as_int(),
            std::min<int64_t>(2 - world->rank(), s.micro_batches));
}

TEST(DistBenchTraining, RefusesABaselineOfAnotherWorkload) {
  const std::unique_ptr<comm::Communicator> world = testing::fresh_communicator();
  bench::BenchResult other = bench::BenchResult::start("ch08_dist_bench", 0, nullptr);
  other.add_row(Json(Json::Object{{"rung", "1 rank"},
                                  {"ranks", 1},
                                  {"model", "tiny"},
                                  {"batch", 64},
                                  {"seq", 8},
                                  {"micro_batches", 2},
                                  {"step_ms_median", 10.0}}));
  const std::string path = cat(::testing::TempDir(), "ch08_dist_bench_baseline_rank", world->rank(), ".json");
  other.write(path);
  TrainingBenchSettings s = tiny_settings();
  s.baseline = path;
  bench::BenchResult result = bench::BenchResult::start("ch08_dist_bench", 0, nullptr);
  testing::expect_error([&] { run_training_staircase(*world, s, result); }, ErrorKind::InvalidArgument,
                        {"--baseline", "batch 64"});
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lab::ch08
