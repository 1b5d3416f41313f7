// --cuda-graphs: the training step captured once in a CUDA graph and replayed at every later step. Chapter 9's
// last rung on one GPU.
//
// What changes from the previous rung: the GPU runs the same kernels on the same data, but the host no longer
// queues them one by one. An eager step is several hundred launches (a d12 step of this project: 1266 kernels
// and cuBLAS calls, measured on an H100), each costing the host microseconds of work; when the kernels are short
// (a small model, a small batch, fast kernels) the GPU waits for the host between them. A replay queues the whole
// step with one cudaGraphLaunch.
//
// How it works (TrainStep::enqueue() queues a step without reading anything back; the rest is here):
//   1. warm-up: the first steps run eagerly on the graph's own stream, allocating from a private memory pool
//      (cuda::create_private_pool), so that the pool holds every block a step needs;
//   2. capture: the next step is captured (cuda::Graph) in the same pool: the same sequence of allocations gets the
//      same blocks without a cudaMalloc (which a capture refuses), and the pool keeps them for the graph;
//   3. replay, every step from then on: the step's micro-batches are copied into fixed input buffers (the ones the
//      capture read), the learning rate and AdamW's bias corrections into the optimizer's device buffer
//      (AdamW::stage_step), the graph is launched, and the step's scalars are read once, as report() always does.
// The results are the eager step's: the same kernels in the same order on the same values (the tests compare
// losses and weights bit for bit under the CUDA emulator).
//
// Data, tensor and pipeline parallelism and ZeRO over NCCL are captured too: their collectives, sends and receives
// are queued on the graph's stream (the overlapped stage's all-reduces on a side stream forked from it and joined
// back) and replayed with the kernels (common/dist/data_parallel_step.h, ch08_distributed/pp/pipeline_step.h,
// ch07_memory/zero/stage3_parameters.h).
//
// When not to use it: a step that decides something on the host, waits for other ranks on the host or times its
// phases (ZeRO stage 3's prefetch thread, the optimizer in backward or offloaded, transfers over MPI: refused with the
// reason TrainStep::capture_blocker gives; fp16's loss scaling decides on the device and is captured); micro-batches
// whose shape changes between steps (refused: a new shape needs a new capture); the CPU, which has no kernels to
// capture. Memory: the pool keeps the step's blocks reserved between steps (the eager step's cache keeps them too), but
// work outside the step, such as an evaluation, cannot use them and allocates its own.
#pragma once

#include <cstdint>
#include <memory>

#include "common/train/train_step.h"

namespace lab::ch09 {

class GraphedStep {
 public:
  // `step` must be capturable (InvalidArgument "--cuda-graphs: <its capture_blocker()>" otherwise) and outlive
  // this; `warmup_steps` (>= 1) eager steps come before the capture.
  explicit GraphedStep(TrainStep& step, int64_t warmup_steps = 1);
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  // One step, as TrainStep::run: step().config().accum_steps micro-batches from `next_batch`, learning rate `lr`.
  // Their shapes and dtypes are the first step's (InvalidArgument otherwise). Ordered after the work queued on
  // the caller's current stream, and finished when it returns.
  TrainStepResult run(const BatchSource& next_batch, double lr);

  TrainStep& step() { return step_; }
  bool captured() const;
  int64_t replays() const { return replays_; }  // steps run by launching the graph (the capture's included)

 private:
  struct Capture;  // the stream, pool, graph and input buffers (CUDA builds only)
  TrainStep& step_;
  int64_t warmup_left_;
  int64_t replays_ = 0;
  std::unique_ptr<Capture> capture_;
};

}  // namespace lab::ch09
