// Running a schedule on one stage (see stage.h).
#include "ch08_distributed/pp/stage.h"

#include <algorithm>
#include <map>
#include <memory>

#include "common/bench/timer.h"
#include "common/ops/reduce.h"

namespace lab::ch08::pp {

namespace {

// What the stage keeps of one micro-batch between its forward and its backward.
struct InFlight {
  MicroBatch batch;
  std::unique_ptr<Tape> tape = std::make_unique<Tape>();
  Tensor received;  // the activation from the previous stage (not on the first stage)
  Var input;        // `received` as the input of this stage's blocks, whose gradient goes back
  Var output;       // this stage's output, whose gradient comes from the next stage (not on the last stage)
  Tensor losses;    // the last stage's per-position losses
};

Tensor new_boundary_tensor(const MicroBatch& batch, const GPT2& model) {
  MemoryScope scope(MemCategory::Activations);
  return Tensor::empty({batch.inputs.dim(0), batch.inputs.dim(1), model.config().n_embd}, DType::F32, model.device());
}

}  // namespace

StageStepStats PipelineStage::run(const BatchSource& next_batch, int micro_batches, const ops::GradScale& grad_scale,
                                  const Tensor& loss_sum, const std::function<void()>& before_last_backward) {
  const Device device = model_.device();
  const std::vector<PipeAction> actions = pipeline_schedule(schedule_, link_.stage(), link_.stages(), micro_batches);
  StageStepStats stats;
  std::map<int, InFlight> in_flight;
  // The micro-batch's record, reading its batch when it is first mentioned (both schedules first mention
  // the micro-batches in order, so the batch source is read in order).
  auto flight = [&](int m) -> InFlight& {
    auto it = in_flight.find(m);
    if (it != in_flight.end()) return it->second;
    const bench::Timer data_timer;
    // A copy of its own on the model's device: the source may refill the same tensors at its next call (the
    // trainer's loader does), and the stage holds several micro-batches at once. A captured run's batches are the
    // graph's buffers, one per micro-batch.
    const MicroBatch source = next_batch();
    MicroBatch batch = captured_ ? source : MicroBatch{source.inputs.to(device), source.targets.to(device)};
    stats.data_seconds += data_timer.seconds();
    InFlight& f = in_flight[m];
    f.batch = std::move(batch);
    return f;
  };
  // Marks a forward or backward's start and end on the device's clock: its time is the device's, read later
  // (last_times), with no synchronisation between the ops.
  auto compute = [&](const std::function<void()>& body) {
    if (captured_) {
      body();
      return;
    }
    const int start = clock_.mark();
    body();
    busy_marks_.emplace_back(start, clock_.mark());
  };

  clock_.clear();
  busy_marks_.clear();
  if (!captured_) span_start_ = clock_.mark();
  for (const PipeAction& a : actions) {
    InFlight& f = flight(a.micro_batch);
    switch (a.op) {
      case PipeOp::RecvActivation:
        f.received = new_boundary_tensor(f.batch, model_);
        link_.recv_activation(f.received);
        break;
      case PipeOp::Forward:
        compute([&] {
          Tape& tape = *f.tape;
          f.input = link_.is_first() ? model_.embed(tape, f.batch.inputs) : Var(f.received, true);
          const Var out = model_.forward_blocks(tape, f.input);
          if (link_.is_last())
            f.losses = model_.head_loss(tape, out, f.batch.targets, grad_scale);
          else
            f.output = out;
        });
        stats.peak_live = std::max(stats.peak_live, static_cast<int>(in_flight.size()));
        break;
      case PipeOp::SendActivation: link_.send_activation(f.output.value()); break;
      case PipeOp::RecvGradient:
        f.output.bind_grad(new_boundary_tensor(f.batch, model_));
        link_.recv_gradient(f.output.grad());
        break;
      case PipeOp::Backward:
        if (a.micro_batch == micro_batches - 1 && before_last_backward) before_last_backward();
        compute([&] { f.tape->backward(); });
        if (link_.is_last())
          ops::accumulate_sum(loss_sum, f.losses,
                              1.0 / (static_cast<double>(f.losses.numel()) * static_cast<double>(micro_batches)));
        if (link_.is_first()) in_flight.erase(a.micro_batch);
        break;
      case PipeOp::SendGradient:
        link_.send_gradient(f.input.grad());
        in_flight.erase(a.micro_batch);
        break;
    }
  }
  if (!captured_) span_end_ = clock_.mark();
  return stats;
}

StageTimes PipelineStage::last_times() const {
  StageTimes times;
  if (clock_.marks() == 0) return times;  // no run yet
  for (const auto& [start, end] : busy_marks_) times.busy_seconds += clock_.seconds(start, end);
  times.span_seconds = clock_.seconds(span_start_, span_end_);
  return times;
}

}  // namespace lab::ch08::pp
