// AdamW over a model's flat parameter buffer (PyTorch semantics), with global-norm gradient clipping.
//
// The moments m and v are flat buffers parallel to the parameters (MemCategory::Optimizer). Weight decay
// applies to the 2-D weights only, the store's decay_ranges(), which the fused op takes in the same single pass
// (common/ops/adamw.h); the layout of the buffers is the store's (backward order for GPT-2).
#pragma once

#include <string>

#include "common/nn/parameters.h"
#include "common/ops/adamw.h"

namespace lab {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  AdamW(ParameterStore& params, const AdamWConfig& config);

  // One update with learning rate `lr`; gradients are multiplied by grad_scale first (clipping).
  void step(float lr, float grad_scale = 1.0f);

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t step) { step_ = step; }
  const Tensor& m() const { return m_; }
  const Tensor& v() const { return v_; }
  // One parameter's moments: views of m and v with its shape (checkpoints store them per parameter name).
  Tensor m(const std::string& name) const;
  Tensor v(const std::string& name) const;
  const AdamWConfig& config() const { return config_; }

 private:
  ParameterStore& params_;
  AdamWConfig config_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

// sqrt(sum of squared gradients) over the whole flat gradient buffer.
double global_grad_norm(const ParameterStore& params);
// PyTorch's clip_grad_norm_ coefficient: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (off).
float clip_coefficient(double grad_norm, double max_norm);

}  // namespace lab
