// GPT-2: learned token and position embeddings, pre-LN transformer blocks, a final LayerNorm and an LM head
// tied to the token embedding (logits = x @ wte^T), exactly as the published model.
//
// Parameter names are Hugging Face's ("wte.weight", "h.3.attn.c_attn.weight", "ln_f.bias", ...), so weight
// import/export is a rename-free walk; note that our linear weights are stored [out, in] (PyTorch's Linear)
// while HF's Conv1D stores [in, out]: the safetensors import/export transposes them.
#pragma once

#include <vector>

#include "common/nn/config.h"
#include "common/nn/modules.h"

namespace lab {

class GPT2 {
 public:
  GPT2(const GPT2Config& config, Device device, ModelOptions options = {});

  // GPT-2's initialisation from a seed: N(0, 0.02) weights, residual projections scaled by 1/sqrt(2 L),
  // zero biases, unit LayerNorm gains; padded vocabulary rows stay zero. Device and thread-count independent.
  void init_weights(uint64_t seed);

  // Final hidden states [B,T,C] for tokens [B,T] (i32, on the model's device).
  Var hidden(Tape& tape, const Tensor& tokens) const;
  // Logits over the padded vocabulary [B,T,Vp].
  Var logits(Tape& tape, const Tensor& tokens) const;
  // Per-position cross-entropy losses [B*T] against targets [B,T]. When the tape records, backward()
  // afterwards accumulates the gradient of grad_scale * mean(loss) into the flat gradient buffer.
  Tensor loss(Tape& tape, const Tensor& tokens, const Tensor& targets, float grad_scale = 1.0f) const;

  const GPT2Config& config() const { return config_; }
  ParameterStore& parameters() { return params_; }
  const ParameterStore& parameters() const { return params_; }
  ModelOptions& options() { return options_; }
  Device device() const { return params_.device(); }

 private:
  GPT2Config config_;
  ParameterStore params_;
  ModelOptions options_;
  Var wte_, wpe_;
  std::vector<Block> blocks_;
  LayerNorm ln_f_;
};

// FLOPs of one training step per token (forward + backward): 6 N + 12 L C T, with N the parameters in
// matmuls (embeddings counted for the LM head) — the usual MFU convention.
double gpt2_flops_per_token(const GPT2Config& config, int64_t seq_len);

}  // namespace lab
