// The runs the layout tests compare (see layout_runs.h).
#include "tests/ch08_distributed/layout_runs.h"

#include "ch08_distributed/make_train_step.h"
#include "ch08_distributed/tp/tensor_parallel.h"
#include "common/util/rng.h"

namespace lab::testing {

namespace {

AdamWConfig adamw_config() {
  return {0.9f, 0.95f, 1e-8f, 0.1f};
}

// Rows [first, first + rows) of a global micro-batch as inputs and targets on the CPU.
MicroBatch rows_of(const Tensor& tokens, int64_t first, int64_t rows) {
  const int64_t T = tokens.dim(1) - 1;
  const std::vector<int32_t> all = tokens.to_ints();
  std::vector<int32_t> x, y;
  for (int64_t r = first; r < first + rows; ++r)
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(all[r * (T + 1) + t]);
      y.push_back(all[r * (T + 1) + t + 1]);
    }
  return {Tensor::from_ints(x, {rows, T}), Tensor::from_ints(y, {rows, T})};
}

// `run.steps` steps of `step`; this rank reads rows [first_row, first_row + run.batch) of each global
// micro-batch of `global_rows` rows.
RunResult train(GPT2& model, TrainStep& step, const RunSettings& run, int64_t global_rows, int64_t first_row) {
  RunResult result;
  for (int s = 0; s < run.steps; ++s) {
    int micro = 0;
    const BatchSource source = [&] {
      return rows_of(global_tokens(run, global_rows, s, micro++), first_row, run.batch);
    };
    const TrainStepResult r = step.run(source, kLearningRate);
    result.losses.push_back(r.loss);
    result.grad_norms.push_back(r.grad_norm);
    result.loss_scales.push_back(r.loss_scale);
    result.skipped.push_back(r.skipped);
  }
  for (const ParamInfo& p : model.parameters().infos())
    result.weights[p.name] = model.parameters().value(p.name).to(Device::cpu());
  return result;
}

// fp16 matmuls and loss scaling, when the run asks for them.
void apply_fp16(const RunSettings& run, GPT2& model, TrainStep& step) {
  if (!run.fp16) return;
  model.set_matmul_dtype(DType::F16);
  step.set_loss_scaling(run.fp16);
}

}  // namespace

std::string LayoutCase::name() const {
  return cat("dp", layout.dp, "_tp", layout.tp, "_pp", layout.pp, "_", ch08::pp_schedule_name(schedule));
}

GPT2Config layout_test_config() {
  GPT2Config c;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 300;
  c.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(c.vocab_size));
  return c;
}

TrainStepConfig RunSettings::step_config() const {
  return {micro_batches, kGradClip, false};
}

Tensor global_tokens(const RunSettings& run, int64_t rows, int step, int micro) {
  Rng rng(run.seed * 1000003ull + static_cast<uint64_t>(step) * 101ull + static_cast<uint64_t>(micro));
  std::vector<int32_t> ids(static_cast<size_t>(rows * (run.seq + 1)));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(layout_test_config().vocab_size)));
  return Tensor::from_ints(ids, {rows, run.seq + 1});
}

RunResult run_single_process(const GPT2Config& config, const RunSettings& run, int dp) {
  GPT2 model(config, Device::cpu());
  model.init_weights(run.seed);
  AdamW optimizer(model.parameters(), adamw_config());
  RunSettings whole = run;
  whole.batch = run.batch * dp;
  TrainStep step(model, optimizer, whole.step_config());
  apply_fp16(run, model, step);
  return train(model, step, whole, whole.batch, 0);
}

LayoutRun run_layout(comm::Communicator& world, const LayoutCase& layout_case, const GPT2Config& config,
                     const RunSettings& run) {
  LayoutRun r;
  r.context = std::make_unique<comm::ParallelContext>(world, layout_case.layout);
  r.model = ch08::tp::model_for_rank(*r.context, config, Device::cpu());
  r.model->init_weights(run.seed);
  r.optimizer = std::make_unique<AdamW>(r.model->parameters(), adamw_config());
  ch08::ParallelOptions options;
  options.layout = layout_case.layout;
  options.micro_batches = run.micro_batches;
  options.pp_schedule = layout_case.schedule;
  r.step = ch08::make_train_step(*r.context, options, *r.model, *r.optimizer, run.step_config());
  apply_fp16(run, *r.model, *r.step);
  const int64_t dp = layout_case.layout.dp;
  r.result = train(*r.model, *r.step, run, dp * run.batch, r.context->coords().dp * run.batch);
  return r;
}

Tensor slice_for(const GPT2& model, const std::string& name, const Tensor& whole) {
  const ModelShard& shard = model.shard();
  Tensor t = whole;
  if (name == "wte.weight" && whole.dim(0) != model.padded_vocab()) {  // pad to the layout's table
    t = Tensor::zeros({model.padded_vocab(), whole.dim(1)}, DType::F32);
    t.slice_rows(0, whole.dim(0)).copy_from(whole);
  }
  return tp_slice(t, tp_split_of(name), shard.tp_rank, shard.tp_size);
}

}  // namespace lab::testing
