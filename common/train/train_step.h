// One training step of GPT-2: start new gradients, forward and backward over the step's micro-batches
// (gradient accumulation), the global gradient norm, clipping, and the AdamW update. The trainer (chapter 10)
// and every benchmark that times a step use this one class.
//
// enqueue() calls its parts in a fixed order; each part is a virtual function, so a chapter changes the part its
// optimization is about and inherits the rest:
//
//   zero_grads()         starts the step's gradients: on CUDA the flat buffer's are marked stale, not zero-filled,
//                        and each parameter's first contribution writes over it (ParameterStore::start_new_gradients;
//                        the CPU zero-fills the buffer); after the micro-batches, what nothing wrote is zero-filled
//                        (zero_unwritten_grads). ch07
//                        ZeRO-2/3: each rank zeroes only its shard of the gradients.
//   run_micro_batches()  the loop over micro-batches (accumulation). ch08 pipeline parallelism replaces the
//                        whole loop with its schedule (GPipe: all forwards, then all backwards; 1F1B).
//   forward_backward()   one micro-batch's forward and backward. ch06 fp16 multiplies the loss's gradient
//                        by the loss scale here (a scale on the device, which the classifier reads); ch08 overlapped
//                        data parallelism starts each gradient bucket's all-reduce from inside backward (hooks on the
//                        tape) and waits for them in reduce_gradients(); ch07 recompute is a model option and needs
//                        nothing here.
//   reduce_gradients()   after the last backward. ch08 data parallelism: all-reduce the gradient buffer
//                        (naive per tensor, or flat buckets); ch07 ZeRO-2: reduce-scatter. One process: nothing.
//   compute_gradient_norm()  the global norm clipping uses and the update's gradient scale, into the step's
//                        scalars on the device. ch08 tensor and pipeline parallelism, ZeRO-2, the optimizer in
//                        backward: sum the squares across ranks (or as backward went) into a device float
//                        (write_gradient_norm); ch06 loss scaling: the norm of the unscaled gradients.
//   optimizer_step()     the update, its gradient scale read from the step's scalars. ch06 mixed precision:
//                        unscale, skip the step on inf/NaN (the scaler marks the gradient scale, and the update
//                        reads the mark), update fp32 master weights and copy them down; ch07 ZeRO-1: update this
//                        rank's shard, then all-gather; CPU offload; optimizer in backward: the update already
//                        happened, nothing is left to do.
//
// Enqueued, then reported: enqueue() queues the whole step on the device and reads nothing back. The step's
// scalars, the loss summed over the micro-batches, the gradient norm and the update's gradient scale (clipping
// and the loss scale's removal), live in one small f32 tensor on the model's device, written by the ops that
// compute them and read by AdamW there (ops::GradScale); so does fp16's loss scaler (its scale, its step counts and
// whether this step was skipped). report() reads them, once, and waits for the step. run() is the two. What still
// reads back inside enqueue(): the offloaded optimizer (its update runs on the CPU). The steps
// whose gradients are spread over ranks (ZeRO-2 and 3, tensor and pipeline parallelism) add their partial sums of
// squares on the device and all-reduce that one float there (write_gradient_norm). On the CPU the losses and weights
// are bitwise those of reading back, as the same double arithmetic runs in the same order. A step that reads nothing
// back can be captured in a CUDA graph and replayed (chapter 9: ch09_advanced/graphed_step.h); capture_blocker()
// says why one cannot.
//
// Configured rather than overridden: the number of micro-batches, the clipping threshold, whether the
// phases are timed (benchmarks: the device is synchronised between phases so that forward, backward and the
// optimizer each get their own time; the trainer leaves it off, as synchronising costs time on a GPU), and
// dynamic loss scaling (set_loss_scaling).
//
// Mixed precision (chapter 6) lives in the model (GPT2::set_matmul_dtype: 16-bit matmul operands, fp32
// everything else) and here:
//   - every optimizer step leaves the model's 16-bit weight copy rounded from the fp32 master weights: AdamW writes
//     it in its own pass where it updates the whole flat buffer on the model's device (the plain step, and the
//     optimizer in backward parameter by parameter; writes_16bit_copy()), otherwise enqueue() refreshes it after
//     the update (ZeRO's shards, the offloaded optimizer);
//   - with loss scaling (fp16), forward_backward() scales the loss's gradient by the scale (through
//     loss_gradient_scale(), which an override of forward_backward must use too), the norm is divided by
//     it, and an inf/NaN norm (the norm is a sum of squares over the whole flat gradient buffer, on CPU and
//     CUDA, so any non-finite gradient makes it non-finite) skips the update; otherwise the 1/scale is
//     folded into the gradient scale that optimizer_step() passes to AdamW. All of it on the device: the scale
//     lives there, ops::update_loss_scale moves it after the norm and marks a skipped step's gradient scale NaN,
//     which AdamW reads as "update nothing". So an fp16 step, too, reads nothing back and can be captured.
//     A skipped step leaves weights and optimizer state (AdamW's step count included: report() takes back the
//     count the update made) untouched; the caller's step counter moves on (its batches were consumed), as with
//     PyTorch's GradScaler. With loss scaling, report() must follow each enqueue() (the next one checks).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/bench/timer.h"
#include "common/core/tensor.h"
#include "common/nn/gpt2.h"
#include "common/ops/grad_scale.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"

namespace lab {

// One micro-batch: token ids [B, T] and their targets [B, T], on any device (the step moves them to the
// model's device when they are elsewhere; that time counts as data time).
struct MicroBatch {
  Tensor inputs;
  Tensor targets;
};

// Hands out the next micro-batch at each call: the trainer's loader, or a benchmark's fixed batch.
using BatchSource = std::function<MicroBatch()>;

struct TrainStepConfig {
  int64_t accum_steps = 1;   // micro-batches per optimizer step; each backward adds 1/accum_steps of its gradient
  double grad_clip = 1.0;    // clip the global gradient norm to this; 0: off
  bool time_phases = false;  // synchronise between phases and time each one (the *_seconds fields below)
};

struct TrainStepResult {
  double lr = 0;
  double loss = 0;          // mean loss over the step's micro-batches (an f32 scalar of the step)
  double grad_norm = 0;     // the global gradient norm before clipping (unscaled; inf/NaN on overflow; f32)
  double loss_scale = 0;    // the scale this step's backward used (0: no loss scaling)
  bool skipped = false;     // loss scaling found inf/NaN gradients: no update was made
  double seconds = 0;       // the whole step, data included; the device is synchronised at its end
  double data_seconds = 0;  // waiting for micro-batches and moving them to the device
  // With time_phases only (0 otherwise); data time is in none of them.
  double forward_seconds = 0;    // zeroing the gradients and the forward passes
  double backward_seconds = 0;   // the backward passes (and reading each micro-batch's loss)
  double optimizer_seconds = 0;  // gradient reduction, norm, clipping and the update
};

class TrainStep {
 public:
  // The model and the optimizer over its parameters must outlive the step.
  TrainStep(GPT2& model, AdamW& optimizer, TrainStepConfig config);
  virtual ~TrainStep() = default;
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One optimizer step at learning rate `lr`, reading config().accum_steps micro-batches from `next_batch`:
  // enqueue() then report().
  TrainStepResult run(const BatchSource& next_batch, double lr);
  // Queues the step on the device without reading anything back (but see the header comment for what does).
  void enqueue(const BatchSource& next_batch, double lr);
  // Waits for the enqueued step and returns what it did: one read of the step's scalars.
  TrainStepResult report();

  GPT2& model() { return model_; }
  AdamW& optimizer() { return optimizer_; }
  const TrainStepConfig& config() const { return config_; }
  // Dynamic loss scaling (fp16) from the next step on, with a fresh scaler of `scaling`; nullopt: none (the
  // default).
  void set_loss_scaling(const std::optional<LossScalerConfig>& scaling);
  // The loss scaler, null without loss scaling: its state as of the last report() (checkpoints save it).
  const DynamicLossScaler* loss_scaler() const { return loss_scaler_ ? &*loss_scaler_ : nullptr; }
  // A checkpoint's scaler state, for the next step on (the host's copy and the device's); InvalidArgument without
  // loss scaling or for a bad state.
  void set_loss_scaler_state(const LossScalerState& state);

  // Why enqueue() cannot be captured in a CUDA graph (ch09_advanced/graphed_step.h), as the end of a sentence
  // such as "timing the phases synchronises the device between them"; empty when it can: it then makes
  // no host read, no synchronisation and no host-side decision that a replay would have to repeat. A step that
  // overrides a part with one of those says so here.
  virtual std::string capture_blocker() const;
  // Called once by GraphedStep before the first step it runs (capture_blocker() being empty): a step whose ranks
  // communicate makes its collectives queue on the stream, so that the capture records them (data parallelism
  // over NCCL: comm::Communicator::set_queued).
  virtual void prepare_capture() {}

 protected:
  // The parts, in the order enqueue() calls them (see the header comment for who overrides which).
  virtual void zero_grads();
  // Adds the step's mean loss into loss_sum(); fills data_seconds, forward_seconds and backward_seconds.
  virtual void run_micro_batches(const BatchSource& next_batch, TrainStepResult& result);
  // Adds the micro-batch's mean loss / accum_steps into loss_sum().
  virtual void forward_backward(const MicroBatch& batch, TrainStepResult& result);
  virtual void reduce_gradients() {}
  // Writes the norm of the gradients divided by the loss scale, and the update's gradient scale (clipping at
  // config().grad_clip, times 1 / the loss scale), into the step's scalars. By default on the device from the flat
  // gradient buffer; a step whose gradients are spread over ranks adds its partial sums of squares into a device
  // float (ops::accumulate_sum_squares), all-reduces it and calls write_gradient_norm.
  virtual void compute_gradient_norm();
  // The update at learning rate `lr`, its gradient scale grad_scale() (read on the device). With
  // writes_16bit_copy(), it writes the model's 16-bit copy too (AdamW::step_with_16bit_copy).
  virtual void optimizer_step(double lr);
  // Called by report() before it reads the step's scalars: a step whose collectives are queued on the stream waits
  // for them there, under its communicators' timeout, so that a rank that stopped fails the others with
  // Error(Comm) rather than hanging them in the read.
  virtual void before_read_back() {}
  // Whether the optimizer writes the model's 16-bit weight copy in its update (mixed precision, an optimizer that is
  // neither sharded nor offloaded), so that enqueue() need not refresh it after.
  bool writes_16bit_copy() const;

  // The step's scalars: the loss sum ([1], the step's mean loss once every micro-batch has added its share),
  // and the update's gradient scale for AdamW (ops::GradScale over the scalars' tensor).
  const Tensor& loss_sum() const { return loss_sum_; }
  ops::GradScale grad_scale() const { return ops::GradScale(grad_scale_); }
  // For a step that computes its loss on the host: the step's loss (replacing the sum).
  void write_loss(double loss);
  // From `sum_squares` (its first f32, on the model's device: the gradients' sum of squares as backward made them,
  // times the loss scale squared), on the device: the norm divided by the loss scale, and the gradient scale that
  // follows (ops::norm_and_scale).
  void write_gradient_norm(const Tensor& sum_squares);

  // What a micro-batch's backward multiplies the mean loss's gradient by: 1/accum_steps, times the loss scale (which
  // lives on the device: the classifier reads it there).
  ops::GradScale loss_gradient_scale() const;
  // The loss scale: 1 without loss scaling, else the scaler's scale on the device.
  ops::GradScale loss_scale() const;

  // Called by report() once it has read the step's scalars (the step's work is done): a step that measured the step
  // on the device reads its own measurements here, once (the pipeline's bubble). Collective when the step is.
  virtual void after_report() {}

  // With time_phases: synchronises the device and adds the time since the last lap to `phase_seconds`.
  void lap(double& phase_seconds);
  // Starts the next phase's time now (after a wait that belongs to no phase, such as data).
  void restart_phase();

 private:
  GPT2& model_;
  AdamW& optimizer_;
  TrainStepConfig config_;
  std::optional<DynamicLossScaler> loss_scaler_;  // the host's copy of the scaler, as of the last report()
  bool reported_ = true;                          // report() came after the last enqueue()
  bench::Timer phase_timer_;
  // Writes the host scaler's state into the device's.
  void write_scaler_state();

  // The scalars, [loss sum, gradient norm, gradient scale] then the loss scaler's state (ops::LossScaleSlot) on the
  // model's device, and views of them.
  Tensor scalars_, step_scalars_, scaler_state_, loss_sum_, grad_scale_;
  // The enqueued step's result so far, and its clock.
  TrainStepResult pending_;
  bench::Timer step_timer_;
};

}  // namespace lab
