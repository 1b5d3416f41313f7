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
                                  const std::function<void()>& before_last_backward) {
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
    // trainer's loader does), and the stage holds several micro-batches at once.
    const MicroBatch source = next_batch();
    MicroBatch batch{source.inputs.to(device), source.targets.to(device)};
    stats.data_seconds += data_timer.seconds();
    InFlight& f = in_flight[m];
    f.batch = std::move(batch);
    return f;
  };
  // Times a forward or backward, the device synchronised so that the time is the computation's.
  auto compute = [&](const std::function<void()>& body) {
    const bench::Timer timer;
    body();
    synchronize(device);
    stats.busy_seconds += timer.seconds();
  };

  const bench::Timer span;
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
        if (link_.is_last()) stats.loss_sum += ops::sum(f.losses) / static_cast<double>(f.losses.numel());
        if (link_.is_first()) in_flight.erase(a.micro_batch);
        break;
      case PipeOp::SendGradient:
        link_.send_gradient(f.input.grad());
        in_flight.erase(a.micro_batch);
        break;
    }
  }
  stats.span_seconds = span.seconds();
  return stats;
}

}  // namespace lab::ch08::pp
