// AdamW over a model's flat parameter buffer (PyTorch semantics), with global-norm gradient clipping.
//
// The moments m and v are flat buffers parallel to the parameters (MemCategory::Optimizer). Weight decay
// applies to the 2-D weights only, the store's decay_ranges(), which the fused op takes in the same single pass
// (common/ops/adamw.h); the layout of the buffers is the store's (backward order for GPT-2).
//
// Two other ways to apply the same update (chapter 7), each element's arithmetic unchanged:
//   - one parameter at a time (optimizer in backward): begin_step() counts the step, then update() applies it to
//     each parameter as its gradient becomes final;
//   - sharded (ZeRO): the optimizer owns some ranges of the flat buffer and keeps moments for those only, the
//     ranges one after the other in m and v; step() updates the owned ranges of the parameters;
//   - with its state in host memory (CPU offload, OptimizerState::Host): the moments and an fp32 master copy of
//     the parameters live in pinned host memory and step() runs on the CPU: the gradients are copied down, the
//     master copy updated, and the parameters copied up, in chunks that overlap the transfers with the update
//     (offload_pipeline.h). With parameters on the CPU the state is in host memory already, and nothing changes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/nn/parameters.h"
#include "common/ops/adamw.h"
#include "common/optim/offload_pipeline.h"

namespace lab {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// Where the optimizer keeps its state (moments, and the master copy of the parameters when it is not the model's).
enum class OptimizerState { Device, Host };

class AdamW {
 public:
  // Moments for the whole flat buffer.
  AdamW(ParameterStore& params, const AdamWConfig& config);
  // Moments for the `owned` ranges of the flat buffer only (sorted, disjoint, inside it; InvalidArgument
  // otherwise), stored one after the other.
  AdamW(ParameterStore& params, const AdamWConfig& config, std::vector<ElementRange> owned);
  // Moments for the whole flat buffer, on the parameters' device or in host memory (see above). The master copy
  // is taken from the parameters at the first step, so weights loaded before it are the ones trained. Offloaded,
  // the step moves the buffers in chunks of `offload_chunk_elements`, overlapped with the CPU's update
  // (offload_pipeline.h).
  AdamW(ParameterStore& params, const AdamWConfig& config, OptimizerState state,
        int64_t offload_chunk_elements = kOffloadChunkElements);
  ~AdamW();

  // One update with learning rate `lr`; gradients are multiplied by grad_scale first (clipping): a number, or one
  // the training step computed on the device (ops::GradScale). Reads the gradients of the owned ranges from the
  // store's flat gradient buffer.
  void step(float lr, const ops::GradScale& grad_scale = 1.0f);
  // The same, also writing each updated parameter, rounded, into `params_16bit`: a 16-bit copy of the whole flat
  // buffer (the model's, GPT2::params_16bit()), in the update's pass (ops/adamw.h), so that the copy needs no
  // refresh of its own. InvalidArgument for a sharded or an offloaded optimizer (whose update does not see the
  // whole buffer where the copy lives: refresh the copy after it).
  void step_with_16bit_copy(float lr, const ops::GradScale& grad_scale, const Tensor& params_16bit);
  // The same with the owned ranges' gradients given as one buffer laid out as m and v (ZeRO-2's gradient shard).
  void step(float lr, const ops::GradScale& grad_scale, const Tensor& owned_grads);
  // The same with the owned ranges' parameters given as one buffer laid out as m and v too (ZeRO-3's parameter
  // shard: the store's flat parameter buffer is released); an undefined `owned_params` means the flat buffer's.
  void step(float lr, const ops::GradScale& grad_scale, const Tensor& owned_grads, const Tensor& owned_params);

  // One parameter at a time: begin_step() starts the next step, update() applies it to the parameter `name`
  // with its gradient `grad` (InvalidArgument on a sharded optimizer).
  // A defined `params_16bit`, the flat 16-bit copy as above, gets the parameter's rounded values too.
  void begin_step() { ++step_; }
  void update(const std::string& name, const Tensor& grad, float lr, const Tensor& params_16bit = Tensor());

  // CUDA graphs (ch09_advanced/graphed_step.h): from the first call on, the update reads its learning rate and
  // bias corrections from a buffer on the parameters' device instead of taking them as numbers, so that an update
  // captured in a graph replays with each step's values. stage_step(lr) writes those of the next step,
  // steps_taken() + 1, into the buffer (a copy from the host, ordered on the current stream: call it before each
  // step, outside a capture); step() then checks that they were staged for it and ignores its own lr. Not for
  // an offloaded optimizer (its update runs on the CPU) nor for update() (InvalidArgument).
  void stage_step(float lr);
  bool steps_staged() const { return step_values_.defined(); }

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t step) { step_ = step; }
  const Tensor& m() const { return m_; }
  const Tensor& v() const { return v_; }
  // One parameter's moments: views of m and v with its shape (checkpoints store them per parameter name).
  // InvalidArgument on a sharded optimizer.
  Tensor m(const std::string& name) const;
  Tensor v(const std::string& name) const;
  const AdamWConfig& config() const { return config_; }
  // The ranges of the flat buffer this optimizer updates: the whole buffer unless sharded.
  const std::vector<ElementRange>& owned() const { return owned_; }
  bool sharded() const { return sharded_; }
  // True when the state lives in host memory while the parameters are on a GPU.
  bool offloaded() const { return master_.defined(); }
  // Offloaded: the chunks a step's transfers are cut into (0 otherwise).
  int64_t offload_chunks() const { return pipeline_ ? pipeline_->chunks() : 0; }

 private:
  // Updates `params`, the parameters of the flat buffer's `range`, with `grads` (range.size() elements each) and
  // the moments at state_offset.
  // `copy`: undefined, or the range's part of the 16-bit copy.
  void update_range(const ElementRange& range, const Tensor& params, int64_t state_offset, const Tensor& grads,
                    const ops::AdamWHyper& hyper, const ops::GradScale& grad_scale, const Tensor& copy = Tensor());
  // step() and step_with_16bit_copy(), `params_16bit` undefined for step().
  void whole_step(float lr, const ops::GradScale& grad_scale, const Tensor& params_16bit);
  // The flat buffer's `range` of the parameters.
  Tensor flat_params(const ElementRange& range) const;
  // The update's hyperparameters at learning rate `lr` and step step_, or with the staged step values.
  ops::AdamWHyper hyper(float lr) const;
  // The offloaded step: gradients down, the update on the CPU, parameters up, chunk by chunk. A scale computed on
  // the GPU is read back first (the CPU's update needs it).
  void host_step(float lr, const ops::GradScale& grad_scale);

  ParameterStore& params_;
  AdamWConfig config_;
  std::vector<ElementRange> owned_;
  bool sharded_ = false;
  Tensor m_, v_;
  Tensor master_, host_grads_;   // offloaded only: the fp32 master parameters and the gradients' host copy
  bool master_current_ = false;  // offloaded: master_ holds the parameters (taken at the first step)
  std::unique_ptr<OffloadPipeline> pipeline_;  // offloaded only
  int64_t step_ = 0;
  Tensor step_values_;  // staged (stage_step): lr and the bias corrections of step staged_for_
  int64_t staged_for_ = 0;
};

// sqrt(sum of squared gradients) over the whole flat gradient buffer.
double global_grad_norm(const ParameterStore& params);
// PyTorch's clip_grad_norm_ coefficient: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (off).
float clip_coefficient(double grad_norm, double max_norm);

}  // namespace lab
