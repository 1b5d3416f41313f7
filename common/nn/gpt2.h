// GPT-2: learned token and position embeddings, pre-LN transformer blocks, a final LayerNorm and an LM head
// tied to the token embedding (logits = x @ wte^T), exactly as the published model.
//
// Parameter names are Hugging Face's ("wte.weight", "h.3.attn.c_attn.weight", "ln_f.bias", ...), so weight
// import/export is a rename-free walk; note that our linear weights are stored [out, in] (PyTorch's Linear)
// while HF's Conv1D stores [in, out]: the safetensors import/export transposes them.
//
// A model is the whole GPT-2, or the shard of it that one rank holds under tensor and pipeline parallelism
// (ModelShard: a range of blocks, with or without the embeddings and the head, each matmul cut across the
// tensor-parallel ranks). A shard declares only its own parameters, with their shard shapes and their
// Hugging Face names, and computes exactly what the whole model computes once its ranks have communicated
// (options.tensor_parallel; the pipeline's transfers are chapter 8's). A single process builds the whole
// model, as before.
#pragma once

#include <vector>

#include "common/nn/config.h"
#include "common/nn/modules.h"
#include "common/nn/shard.h"
#include "common/ops/grad_scale.h"

namespace lab {

// A parameter of the whole model.
struct GPT2Parameter {
  std::string name;
  Shape shape;         // in the whole model (wte with the padded vocabulary of the layout)
  bool decay = false;  // weight decay applies (the 2-D weights)
  int block = -1;      // the block h.<block> it belongs to; -1 for the embeddings and ln_f
};

// Every parameter of the whole model, wte with `padded_vocab` rows, in its canonical order: the weight-decayed
// ones first, each group in the model's order. The order names the random stream of each parameter's
// initialisation, so that every layout draws the same values.
std::vector<GPT2Parameter> gpt2_parameters(const GPT2Config& config, int64_t padded_vocab);
// Whether `shard` holds (a slice of) the parameter.
bool shard_holds(const ModelShard& shard, const GPT2Config& config, const GPT2Parameter& parameter);

class GPT2 {
 public:
  // The whole model, or a shard (see above); a shard with tp_size > 1 needs options.tensor_parallel of the same
  // size and rank. InvalidArgument otherwise.
  GPT2(const GPT2Config& config, Device device, ModelOptions options = {}, const ModelShard& shard = {});

  // GPT-2's initialisation from a seed: N(0, 0.02) weights, residual projections scaled by 1/sqrt(2 L),
  // zero biases, unit LayerNorm gains; padded vocabulary rows stay zero. Device, thread-count and layout
  // independent: a shard holds the very values the whole model would.
  void init_weights(uint64_t seed);

  // ---- the whole forward pass (a shard with every block, the embeddings and the head)
  // Final hidden states [B,T,C] for tokens [B,T] (i32, on the model's device).
  Var hidden(Tape& tape, const Tensor& tokens) const;
  // Logits over the padded vocabulary [B,T,Vp]; on a tensor-parallel shard, this rank's columns of them,
  // [B,T,Vp/tp] starting at vocab_start().
  Var logits(Tape& tape, const Tensor& tokens) const;
  // Per-position cross-entropy losses [B*T] against targets [B,T]. When the tape records, backward()
  // afterwards accumulates the gradient of grad_scale * mean(loss) into the flat gradient buffer.
  Tensor loss(Tape& tape, const Tensor& tokens, const Tensor& targets, const ops::GradScale& grad_scale = 1.0f) const;

  // ---- the same pass in the three parts a pipeline stage runs: embed (first stage), its blocks, and the
  // head (last stage); loss() is head_loss(forward_blocks(embed(tokens))).
  Var embed(Tape& tape, const Tensor& tokens) const;   // [B,T] tokens -> [B,T,C]
  Var forward_blocks(Tape& tape, const Var& x) const;  // this shard's blocks, [B,T,C] -> [B,T,C]
  Tensor head_loss(Tape& tape, const Var& x, const Tensor& targets, const ops::GradScale& grad_scale = 1.0f) const;

  // ---- mixed precision (chapter 6)
  // bf16 or f16: every matmul (each Linear and the tied LM head) reads its input rounded to `dtype` and a
  // `dtype` copy of its weight, and accumulates in fp32 (low_precision_linear.h); everything else (embeddings,
  // LayerNorm, attention's softmax, GELU, residuals, the loss) and every gradient stay fp32, and the fp32
  // parameters remain the master weights; unless options().activations is `dtype` too, which takes the
  // activations and their gradients to 16 bits end to end (modules.h). The copy is one flat buffer parallel to the
  // parameters (MemCategory::Params, 2 bytes a parameter), filled now from the fp32 weights. f32: back to fp32 matmuls,
  // the copy freed. InvalidArgument for other dtypes.
  void set_matmul_dtype(DType dtype);
  DType matmul_dtype() const { return matmul_dtype_; }
  // Refills the 16-bit copy from the fp32 weights (one pass over the flat buffer): after every change to them,
  // the optimizer's step or loading weights. Nothing for fp32. (TrainStep has AdamW write the copy in its own pass
  // where it can: AdamW::step_with_16bit_copy.)
  void refresh_matmul_weights();
  // The 16-bit copy itself, parallel to the flat parameter buffer (undefined for fp32).
  const Tensor& params_16bit() const { return params_16bit_; }

  const GPT2Config& config() const { return config_; }
  const ModelShard& shard() const { return shard_; }
  // The parameters this shard holds, as the whole model has them (full shapes), in canonical order.
  const std::vector<GPT2Parameter>& held_parameters() const { return held_; }
  // Rows of the whole wte (config().padded_vocab_for(tp)), and the first of them this shard holds.
  int64_t padded_vocab() const { return padded_vocab_; }
  int64_t vocab_start() const { return padded_vocab_ / shard_.tp_size * shard_.tp_rank; }
  ParameterStore& parameters() { return params_; }
  const ParameterStore& parameters() const { return params_; }
  ModelOptions& options() { return options_; }
  Device device() const { return params_.device(); }

 private:
  void check_holds(bool part, const char* what) const;
  Var head_logits(Tape& tape, const Var& x) const;

  GPT2Config config_;
  ModelShard shard_;
  int64_t padded_vocab_;
  std::vector<GPT2Parameter> held_;
  ParameterStore params_;
  ModelOptions options_;
  Var wte_, wpe_;
  std::vector<Block> blocks_;
  LayerNorm ln_f_;
  DType matmul_dtype_ = DType::F32;
  Tensor params_16bit_;  // the parameters' 16-bit copy under mixed precision (undefined for fp32)
  Tensor wte_16bit_;     // its view of wte, the LM head's weight
};

// FLOPs of one training step per token (forward + backward): 6 N + 12 L C T, with N the parameters in
// matmuls (embeddings counted for the LM head) — the usual MFU convention.
double gpt2_flops_per_token(const GPT2Config& config, int64_t seq_len);

}  // namespace lab
