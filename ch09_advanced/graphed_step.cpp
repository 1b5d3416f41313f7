// The training step captured in a CUDA graph and replayed (see graphed_step.h).
#include "ch09_advanced/graphed_step.h"

#include <vector>

#include "common/bench/timer.h"
#include "common/core/error.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/caching_allocator.h"
#include "common/cuda/graph.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#endif

namespace lab::ch09 {

#ifdef LAB_WITH_CUDA

// What the graph replays on: its stream, the memory pool its capture allocated from, and the fixed buffers its
// micro-batches are read from.
struct GraphedStep::Capture {
  explicit Capture(int gpu) : gpu(gpu), pool(cuda::create_private_pool(gpu)), stream(gpu) {}
  // The pool's blocks go back to the device once the step's work is over; the graph is never launched again.
  ~Capture() {
    stream.synchronize();
    cuda::release_private_pool(gpu, pool);
  }

  // Copies micro-batch `index` into its fixed buffers (made at the first step, which fixes the shapes), after
  // the work the caller's current stream has queued (a loader's copy into `batch`).
  void fill(int64_t index, const MicroBatch& batch) {
    if (static_cast<size_t>(index) == inputs.size()) {
      MemoryScope scope(MemCategory::Other);
      const Device on = Device::cuda(gpu);
      inputs.push_back({Tensor::empty(batch.inputs.shape(), batch.inputs.dtype(), on),
                        Tensor::empty(batch.targets.shape(), batch.targets.dtype(), on)});
    }
    const MicroBatch& fixed = inputs[static_cast<size_t>(index)];
    for (const auto& [to, from] : {std::pair{&fixed.inputs, &batch.inputs}, std::pair{&fixed.targets, &batch.targets}})
      LAB_CHECK(from->shape() == to->shape() && from->dtype() == to->dtype(), InvalidArgument,
                "--cuda-graphs: a micro-batch of ", shape_str(from->shape()), " ", dtype_name(from->dtype()), " after ",
                shape_str(to->shape()), " ", dtype_name(to->dtype()),
                ": the graph replays the shapes it was captured with");
    cuda::Event ready(/*timing=*/false);
    ready.record();  // on the caller's current stream
    stream.wait(ready);
    const cuda::StreamGuard on(stream);
    fixed.inputs.copy_from(batch.inputs);  // synchronous: `batch` may be overwritten once this returns
    fixed.targets.copy_from(batch.targets);
  }

  int gpu;
  int pool;
  cuda::Stream stream;
  std::vector<MicroBatch> inputs;  // one per micro-batch of a step
  cuda::Graph graph;
};

GraphedStep::GraphedStep(TrainStep& step, int64_t warmup_steps) : step_(step), warmup_left_(warmup_steps) {
  const std::string blocker = step.capture_blocker();
  LAB_CHECK(blocker.empty(), InvalidArgument, "--cuda-graphs: ", blocker);
  LAB_CHECK(warmup_steps >= 1, InvalidArgument,
            "GraphedStep: warmup_steps must be >= 1 (the pool is filled by an "
            "eager step before the capture), got ",
            warmup_steps);
  capture_ = std::make_unique<Capture>(step.model().device().index);
  step.prepare_capture();
}

GraphedStep::~GraphedStep() = default;

bool GraphedStep::captured() const {
  return capture_->graph.captured();
}

TrainStepResult GraphedStep::run(const BatchSource& next_batch, double lr) {
  const bench::Timer timer;
  Capture& d = *capture_;
  const cuda::DeviceGuard on_gpu(d.gpu);
  double data_seconds = 0;
  for (int64_t i = 0; i < step_.config().accum_steps; ++i) {
    const bench::Timer data_timer;
    const MicroBatch batch = next_batch();
    d.fill(i, batch);
    data_seconds += data_timer.seconds();
  }
  const cuda::StreamGuard on(d.stream);
  const cuda::PoolScope pool(d.gpu, d.pool);
  AdamW& optimizer = step_.optimizer();
  optimizer.stage_step(static_cast<float>(lr));
  size_t next = 0;
  const BatchSource fixed_inputs = [&] { return d.inputs[next++]; };
  if (warmup_left_ > 0) {
    --warmup_left_;
    step_.enqueue(fixed_inputs, lr);
  } else {
    const int64_t steps_before = optimizer.steps_taken();
    if (!d.graph.captured()) {
      d.graph.capture(d.stream, [&] { step_.enqueue(fixed_inputs, lr); });
      optimizer.set_steps_taken(steps_before);  // the capture counted a step that did not run
    }
    d.graph.launch(d.stream);
    optimizer.set_steps_taken(steps_before + 1);
    ++replays_;
  }
  TrainStepResult result = step_.report();  // reads on the graph's stream: waits for the step
  result.lr = lr;
  result.seconds = timer.seconds();
  result.data_seconds = data_seconds;
  return result;
}

#else  // a build without the CUDA backend: no model is on a GPU, so capture_blocker() always has a reason

struct GraphedStep::Capture {};

GraphedStep::GraphedStep(TrainStep& step, int64_t warmup_steps) : step_(step), warmup_left_(warmup_steps) {
  fail(ErrorKind::InvalidArgument, "--cuda-graphs: ", step.capture_blocker(), " (this build has no CUDA backend)");
}

GraphedStep::~GraphedStep() = default;

bool GraphedStep::captured() const {
  return false;
}

TrainStepResult GraphedStep::run(const BatchSource&, double) {
  fail(ErrorKind::Unsupported, "--cuda-graphs: this build has no CUDA backend");
}

#endif

}  // namespace lab::ch09
