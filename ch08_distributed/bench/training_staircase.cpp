// The training staircase of ch08_dist_bench (see training_staircase.h).
#include "ch08_distributed/bench/training_staircase.h"

#include <algorithm>
#include <cstdio>

#include "ch08_distributed/pp/pipeline_step.h"
#include "ch10_gpt2/run_config.h"
#include "common/bench/timer.h"
#include "common/dist/data_parallel_step.h"
#include "common/util/rng.h"

namespace lab::ch08 {

// Data parallelism's machinery lives in common/dist.
using dist::DataParallelStep;
using dist::dp_stage_name;
using dist::DpStage;
using dist::GradientReducer;
using dist::ReductionStats;

namespace {

using comm::Communicator;
using comm::OpKind;

constexpr float kLearningRate = 1e-4f;
// The collectives a training step makes, in the order of the row's columns.
constexpr OpKind kCountedKinds[] = {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter,
                                    OpKind::Broadcast, OpKind::Send,      OpKind::Recv};

// A rung's setting: the layout, the dp stage and the pp schedule (every rung carries all three, so that a
// rung differs from the one below in exactly one of them).
struct RungSetting {
  comm::ParallelLayout layout;
  DpStage stage = DpStage::Naive;
  PpSchedule schedule = PpSchedule::GPipe;
};

std::string layout_flag(const comm::ParallelLayout& l) {
  return cat("dp", l.dp, "_tp", l.tp, "_pp", l.pp);
}

std::string rung_name(const RungSetting& s, int ranks) {
  if (ranks == 1) return "1 rank";
  std::string name;
  const auto part = [&](const char* what, int n) {
    if (n > 1) name += cat(name.empty() ? "" : " x ", what, n);
  };
  part("dp", s.layout.dp);
  part("tp", s.layout.tp);
  part("pp", s.layout.pp);
  if (s.layout.dp > 1 && s.layout.tp == 1 && s.layout.pp == 1) name += cat(" ", dp_stage_name(s.stage));
  if (s.layout.pp > 1) name += cat(" ", pp_schedule_name(s.schedule));
  return name;
}

std::string what_changes(const RungSetting& s, int ranks) {
  if (ranks == 1) return "one rank: the baseline";
  const comm::ParallelLayout& l = s.layout;
  if (l.dp > 1 && l.tp == 1 && l.pp == 1) {
    switch (s.stage) {
      case DpStage::Naive: return "data parallel: one all-reduce per gradient tensor after backward";
      case DpStage::Bucketed: return "the gradients all-reduced in buckets of the flat buffer";
      case DpStage::Overlap: return "each bucket all-reduced during backward, on a communication thread";
    }
  }
  if (l.pp > 1 && l.dp == 1 && l.tp == 1) return cat("pipeline of ", l.pp, " stages, ", pp_schedule_name(s.schedule));
  if (l.tp > 1 && l.dp == 1 && l.pp == 1) return cat("tensor parallel over ", l.tp, " ranks");
  return "a combination of the layouts above";
}

// The rungs for `ranks`: pure dp (three stages), pure tp, pure pp (both schedules), then the combinations;
// each rung changes one setting of the rung before it.
std::vector<RungSetting> rung_settings(int ranks) {
  std::vector<comm::ParallelLayout> layouts;
  const auto add = [&](int dp, int tp, int pp) { layouts.push_back({dp, tp, pp}); };
  if (ranks == 1) {
    add(1, 1, 1);
  } else {
    add(ranks, 1, 1);
    add(1, ranks, 1);
    add(1, 1, ranks);
    for (int dp = 1; dp <= ranks; ++dp)
      for (int tp = 1; tp <= ranks / dp; ++tp) {
        if (ranks % (dp * tp) != 0) continue;
        const int pp = ranks / (dp * tp);
        if ((dp > 1) + (tp > 1) + (pp > 1) >= 2) add(dp, tp, pp);
      }
  }
  std::vector<RungSetting> rungs;
  RungSetting current;
  for (const comm::ParallelLayout& layout : layouts) {
    current.layout = layout;
    rungs.push_back(current);
    if (layout.dp > 1 && layout.tp == 1 && layout.pp == 1) {
      for (const DpStage stage : {DpStage::Bucketed, DpStage::Overlap}) {
        current.stage = stage;
        rungs.push_back(current);
      }
    }
    if (layout.pp > 1) {
      current.schedule = current.schedule == PpSchedule::GPipe ? PpSchedule::OneFOneB : PpSchedule::GPipe;
      rungs.push_back(current);
    }
  }
  return rungs;
}

staircase::Staircase make_staircase(const TrainingBenchSettings& s, int ranks) {
  staircase::Staircase stairs{
      "layouts",
      cat("GPT-2 ", s.model, ", ", s.micro_batches, " micro-batches of ", s.batch, " x ", s.seq, " tokens per step, ",
          ranks, " ranks"),
      {"--model", s.model, "--batch", cat(s.batch), "--seq", cat(s.seq), "--micro-batches", cat(s.micro_batches)},
      {}};
  for (const RungSetting& r : rung_settings(ranks))
    stairs.rungs.push_back({rung_name(r, ranks),
                            what_changes(r, ranks),
                            {"--layout", layout_flag(r.layout), "--dp-stage", dp_stage_name(r.stage), "--pp-schedule",
                             pp_schedule_name(r.schedule)}});
  return stairs;
}

RungSetting setting_of(const staircase::Rung& rung, const std::vector<RungSetting>& all, int ranks) {
  for (const RungSetting& r : all)
    if (rung_name(r, ranks) == rung.name) return r;
  fail(ErrorKind::Internal, "no setting for rung ", rung.name);
}

// What one rung measured beyond its step times (rank 0's view, per step).
struct RungExtras {
  RungSetting setting;
  double counted_bytes[std::size(kCountedKinds)] = {};
  double link_bytes = 0, theory_link_bytes = 0;
  bool reduced = false;  // a data-parallel gradient reduction ran (dp > 1)
  int dp_size = 1;
  std::vector<double> grad_seconds, overlap;
  double grad_bytes = 0;
  std::vector<double> bubble;
  double bubble_theory = 0;
  int peak_live = 0;  // the most micro-batches rank 0's stage held activations for at once
};

// The global micro-batches of a step (the same on every rank and every rung), and this data-parallel
// rank's rows of each.
std::vector<MicroBatch> my_micro_batches(const TrainingBenchSettings& s, const GPT2Config& config, int dp_rank,
                                         int dp) {
  const int64_t rows = s.batch / dp, T = s.seq;
  std::vector<MicroBatch> mine;
  for (int64_t m = 0; m < s.micro_batches; ++m) {
    Rng rng(1000 + static_cast<uint64_t>(m));
    std::vector<int32_t> tokens(static_cast<size_t>(s.batch * (T + 1)));
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.vocab_size)));
    std::vector<int32_t> x, y;
    for (int64_t r = dp_rank * rows; r < (dp_rank + 1) * rows; ++r)
      for (int64_t t = 0; t < T; ++t) {
        x.push_back(tokens[static_cast<size_t>(r * (T + 1) + t)]);
        y.push_back(tokens[static_cast<size_t>(r * (T + 1) + t + 1)]);
      }
    mine.push_back({Tensor::from_ints(x, {rows, T}), Tensor::from_ints(y, {rows, T})});
  }
  return mine;
}

// Theory's link bytes per step for rank 0 (see the header): dp's gradients, tp's activation all-reduces,
// pp's boundary activation and gradient of each micro-batch.
double theory_link_bytes(const TrainingBenchSettings& s, const comm::ParallelLayout& l, const GPT2& model) {
  int64_t parameters = 0;
  for (const ParamInfo& p : model.parameters().infos()) parameters += p.numel();
  const double activation = static_cast<double>(s.batch / l.dp) * s.seq * model.config().n_embd * 4;
  const ModelShard& shard = model.shard();
  const int blocks = shard.block_end(model.config()) - shard.first_block;
  double bytes = comm::bus_factor(OpKind::AllReduce, l.dp) * static_cast<double>(parameters) * 4;
  bytes += comm::bus_factor(OpKind::AllReduce, l.tp) * 4.0 * blocks * s.micro_batches * activation;
  if (l.pp > 1) bytes += 2.0 * s.micro_batches * activation;  // rank 0, the first stage: out and back
  return bytes;
}

// Builds the rung's step on every rank and times `s.steps` steps after `s.warmup`.
std::vector<staircase::Measurement> run_rung(Communicator& world, const TrainingBenchSettings& s,
                                             const RungSetting& setting, RungExtras& extras) {
  const comm::ParallelLayout& l = setting.layout;
  const GPT2Config model_config = GPT2Config::from_name(s.model);
  // Checked before any collective, alike on every rank, so that a rung that cannot run fails everywhere.
  LAB_CHECK(s.batch % l.dp == 0, InvalidArgument, "--batch ", s.batch, " does not split over ", l.dp,
            " data-parallel ranks");
  ModelShard::of_rank(model_config, 0, l.tp, 0, l.pp).validate(model_config);

  comm::ParallelContext context(world, l);
  // The trainer's builder (ch10_gpt2/run_config.h): this rank's shard, init_weights(1), AdamW and the layout's step.
  RunConfig config;
  config.model = model_config;
  config.parallel.layout = l;
  config.parallel.dp_stage = setting.stage;
  config.parallel.bucket_bytes = s.bucket_mb << 20;
  config.parallel.micro_batches = s.micro_batches;
  config.parallel.pp_schedule = setting.schedule;
  config.step = {s.micro_batches, 1.0, false};
  const TrainingRun run = build_run(config, context);
  const std::vector<MicroBatch> mine = my_micro_batches(s, model_config, context.coords().dp, l.dp);
  size_t next = 0;
  const BatchSource source = [&] { return mine[next++ % mine.size()]; };

  const auto* dp_step = dynamic_cast<const DataParallelStep*>(run.step.get());
  const auto* pp_step = dynamic_cast<const pp::PipelineStep*>(run.step.get());
  extras = {};
  extras.setting = setting;
  // A tensor-parallel step is a data-parallel one, over a group of one rank when dp is 1: no reducer to report.
  const GradientReducer* reducer = l.dp == 1 ? nullptr
                                   : dp_step ? &dp_step->reducer()
                                   : pp_step ? pp_step->dp_reducer()
                                             : nullptr;
  extras.reduced = reducer != nullptr;
  extras.dp_size = l.dp;
  extras.theory_link_bytes = theory_link_bytes(s, l, *run.model);
  std::vector<Communicator*> groups;  // those with more than one rank: a group of one moves nothing
  for (Communicator* g : {&context.dp(), &context.tp(), &context.pp()})
    if (g->size() > 1) groups.push_back(g);

  std::vector<double> step_seconds, tokens_per_second;
  for (int64_t i = 0; i < s.warmup + s.steps; ++i) {
    world.barrier();
    for (Communicator* g : groups) g->reset_traffic();
    const bench::Timer timer;
    run.step->run(source, kLearningRate);
    const double seconds = timer.seconds();
    // Read the counters before the timing's own all-reduce below.
    extras.link_bytes = 0;
    for (size_t k = 0; k < std::size(kCountedKinds); ++k) {
      extras.counted_bytes[k] = 0;
      for (Communicator* g : groups) {
        const double bytes = static_cast<double>(g->traffic(kCountedKinds[k]).bytes);
        extras.counted_bytes[k] += bytes;
        extras.link_bytes += bytes * comm::bus_factor(kCountedKinds[k], g->size());
      }
    }
    if (reducer && setting.stage == DpStage::Overlap) {  // its own communicator, not in `groups`
      const double bytes = static_cast<double>(reducer->stats().bytes);
      extras.counted_bytes[0] += bytes;
      extras.link_bytes += bytes * comm::bus_factor(OpKind::AllReduce, l.dp);
    }
    Tensor slowest = Tensor::from_floats(std::vector<float>{static_cast<float>(seconds)}, {1});
    world.all_reduce(slowest, comm::ReduceOp::Max);
    if (i < s.warmup) continue;
    step_seconds.push_back(slowest.item() * 1e3);
    tokens_per_second.push_back(static_cast<double>(s.micro_batches * s.batch * s.seq) / slowest.item());
    if (reducer) {
      const ReductionStats& r = reducer->stats();
      extras.grad_bytes = static_cast<double>(r.bytes);
      extras.grad_seconds.push_back(r.comm_seconds);
      extras.overlap.push_back(r.overlap_fraction());
    }
    if (pp_step) {
      extras.bubble.push_back(pp_step->last_stats().bubble);
      extras.bubble_theory = pp_step->last_stats().ideal_bubble;
      extras.peak_live = pp_step->last_stats().peak_live;
    }
  }
  return {{"step_ms", "ms", bench::Better::Lower, step_seconds},
          {"tokens_per_s", "tokens/s", bench::Better::Higher, tokens_per_second}};
}

Json number_or_null(bool present, double value) {
  return present ? Json(value) : Json();
}

// The one-rank step time of the same workload from a --baseline JSON.
double baseline_step_ms(const TrainingBenchSettings& s) {
  const bench::BenchResult base = bench::BenchResult::read(s.baseline);
  for (const Json& row : base.rows) {
    const Json* ranks = row.find("ranks");
    if (!ranks || ranks->as_int() != 1) continue;
    LAB_CHECK(row.at("model").as_string() == s.model && row.at("batch").as_int() == s.batch &&
                  row.at("seq").as_int() == s.seq && row.at("micro_batches").as_int() == s.micro_batches,
              InvalidArgument, "--baseline ", s.baseline, " ran another workload (", row.at("model").as_string(),
              ", batch ", row.at("batch").as_int(), ", seq ", row.at("seq").as_int(), ", micro-batches ",
              row.at("micro_batches").as_int(), "): run it with the same --model, --batch, --seq, --micro-batches");
    return row.at("step_ms_median").as_number();
  }
  fail(ErrorKind::InvalidArgument, "--baseline ", s.baseline, " holds no one-rank row: make it with -np 1");
}

}  // namespace

void TrainingBenchSettings::register_flags(Flags& flags) {
  flags.add_string("model", &model, "training: the GPT-2 (tiny, small, d12, ...)");
  flags.add_int("batch", &batch, "training: rows of the global micro-batch, split over the data-parallel ranks", 1);
  flags.add_int("seq", &seq, "training: tokens per row", 1);
  flags.add_int("micro-batches", &micro_batches, "training: micro-batches per step (the pipeline's M)", 1);
  flags.add_int("steps", &steps, "training: timed steps per rung", 1);
  flags.add_int("bucket-mb", &bucket_mb, "training: the bucket size of the bucketed and overlapped dp stages", 1);
  flags.add_string("baseline", &baseline, "training: a one-rank run's JSON, for scaling efficiency");
}

staircase::StaircaseReport run_training_staircase(Communicator& world, const TrainingBenchSettings& s,
                                                  bench::BenchResult& result) {
  const int ranks = world.size();
  const bool printer = world.rank() == 0;
  const double baseline_ms = s.baseline.empty() ? 0.0 : baseline_step_ms(s);
  const staircase::Staircase stairs = make_staircase(s, ranks);
  const std::vector<RungSetting> settings = rung_settings(ranks);
  std::vector<RungExtras> extras(stairs.rungs.size());
  size_t index = 0;
  const staircase::StaircaseReport report = run_staircase(
      stairs,
      [&](const staircase::Rung& rung) {
        RungExtras& e = extras[index++];
        return run_rung(world, s, setting_of(rung, settings, ranks), e);
      },
      [&](const staircase::RungReport& r) {
        if (!printer) return;
        if (!r.ran) {
          std::printf("%-22s not run: %s\n", r.rung.name.c_str(), r.error.c_str());
        } else {
          std::printf("%-22s %10.1f ms/step\n", r.rung.name.c_str(), r.find("step_ms")->summary.median);
        }
        std::fflush(stdout);
      });

  const size_t first_row = result.rows.size();
  report.add_to(result);
  const char* byte_columns[] = {"all_reduce_bytes", "all_gather_bytes", "reduce_scatter_bytes",
                                "broadcast_bytes",  "send_bytes",       "recv_bytes"};
  for (const char* c : byte_columns) result.describe_column(c, "B", bench::Better::Lower);
  result.describe_column("link_bytes", "B", bench::Better::Lower);
  result.describe_column("algbw_GBps", "GB/s", bench::Better::Higher);
  result.describe_column("busbw_GBps", "GB/s", bench::Better::Higher);
  result.describe_column("overlap_fraction", "fraction", bench::Better::Higher);
  result.describe_column("bubble", "fraction", bench::Better::Lower);
  result.describe_column("scaling_efficiency", "fraction", bench::Better::Higher);
  for (size_t i = 0; i < report.rungs.size(); ++i) {
    const staircase::RungReport& r = report.rungs[i];
    const RungExtras& e = extras[i];
    Json& row = result.rows[first_row + i];
    const comm::ParallelLayout& l = e.setting.layout;
    row.set("ranks", ranks);
    row.set("dp", l.dp);
    row.set("tp", l.tp);
    row.set("pp", l.pp);
    row.set("model", s.model);
    row.set("batch", s.batch);
    row.set("seq", s.seq);
    row.set("micro_batches", s.micro_batches);
    for (size_t k = 0; k < std::size(byte_columns); ++k)
      row.set(byte_columns[k], number_or_null(r.ran, e.counted_bytes[k]));
    row.set("link_bytes", number_or_null(r.ran, e.link_bytes));
    row.set("theory_link_bytes", number_or_null(r.ran, e.theory_link_bytes));
    row.set("link_vs_theory",
            number_or_null(r.ran && e.theory_link_bytes > 0, e.link_bytes / std::max(e.theory_link_bytes, 1.0)));
    const bool reduced = r.ran && e.reduced;
    const double grad_s = reduced ? bench::median(e.grad_seconds) : 0.0;
    const double algbw = grad_s > 0 ? e.grad_bytes / grad_s / 1e9 : 0.0;
    row.set("grad_bytes", number_or_null(reduced, e.grad_bytes));
    row.set("grad_ms", number_or_null(reduced, grad_s * 1e3));
    row.set("algbw_GBps", number_or_null(reduced && grad_s > 0, algbw));
    row.set("busbw_GBps",
            number_or_null(reduced && grad_s > 0, algbw * comm::bus_factor(OpKind::AllReduce, e.dp_size)));
    row.set("overlap_fraction", number_or_null(reduced, reduced ? bench::median(e.overlap) : 0.0));
    row.set("bubble", number_or_null(r.ran && !e.bubble.empty(), e.bubble.empty() ? 0.0 : bench::median(e.bubble)));
    row.set("bubble_theory", number_or_null(r.ran && l.pp > 1, e.bubble_theory));
    row.set("peak_live", number_or_null(r.ran && l.pp > 1, e.peak_live));
    const double own_ms = r.ran ? r.find("step_ms")->summary.median : 0.0;
    const double one_rank_ms = ranks == 1 ? own_ms : baseline_ms;
    row.set("scaling_efficiency", number_or_null(r.ran && one_rank_ms > 0, one_rank_ms / (ranks * own_ms)));
  }
  return report;
}

}  // namespace lab::ch08
