// The building blocks of GPT-2 as small structs of parameter Vars, each with a forward that records
// onto a tape. Parameters themselves live in the model's ParameterStore; modules only hold handles.
#pragma once

#include <functional>
#include <memory>

#include "common/autograd/functions.h"
#include "common/nn/parameters.h"
#include "common/nn/tensor_parallel.h"
#include "common/ops/classifier.h"
#include "common/ops/grad_scale.h"

namespace lab {

struct Linear {
  Var weight;           // [out, in]
  Var bias;             // [out], or undefined
  Tensor weight_16bit;  // mixed precision: the bf16/fp16 copy of weight the product reads; undefined for fp32
  Tensor bias_16bit;    // and of bias, which a 16-bit output adds (16-bit activations); undefined for fp32
  // fp32: ag::linear; with weight_16bit: low_precision_linear (16-bit operands, fp32 accumulation).
  Var forward(Tape& tape, const Var& x) const;
  // The weight the product reads: the 16-bit copy under mixed precision, the fp32 parameter otherwise (what
  // forward's products take, for functions that run the layer's products themselves).
  Tensor matmul_weight() const { return weight_16bit.defined() ? weight_16bit : weight.value(); }
};

struct LayerNorm {
  Var weight, bias;  // [C]
  Var forward(Tape& tape, const Var& x) const { return ag::layernorm(tape, x, weight, bias); }
};

struct MLP {
  Linear c_fc;    // C -> 4C
  Linear c_proj;  // 4C -> C
};

struct CausalSelfAttention {
  Linear c_attn;   // C -> 3C (q, k, v)
  Linear c_proj;   // C -> C
  int n_head = 0;  // the heads this shard computes (all of them without tensor parallelism)
};

struct Block {
  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;
};

// The kernels a model runs, chosen by the caller. Chapters plug in better implementations here
// (flash attention, a fused MLP, recomputation wrapped around whole blocks) without the core knowing them.
struct ModelOptions {
  using AttentionFn = std::function<Var(Tape&, const Var& qkv, int n_head)>;
  using MlpFn = std::function<Var(Tape&, const MLP&, const Var& x, const ModelOptions&)>;
  using BlockFn = std::function<Var(Tape&, const Block&, const Var& x, const ModelOptions&)>;
  AttentionFn attention = ag::attention;
  MlpFn mlp;  // empty: c_proj(gelu(c_fc(x))); a tensor-parallel shard takes none (it needs f and g)
  // Selective recompute (chapter 7): the MLP keeps GELU's input but not its output [..., 4C], and computes the
  // output again in backward, where c_proj's weight gradient reads it. Every MLP implementation honours it: the
  // core's (mlp_forward) and chapter 6's fused one; a tensor-parallel shard refuses it.
  bool recompute_gelu = false;
  // LayerNorm recompute (chapter 7's --recompute selective-ln): the blocks keep ln_1's and ln_2's inputs but not
  // their outputs, and run the LayerNorm again in backward just before the layer that reads its output
  // (ag::recompute_layernorm_in_backward). The core's block and chapter 6's fused one honour it.
  bool recompute_layernorm = false;
  BlockFn block;  // empty: the standard pre-LN block below
  // The loss over the LM head's logits on one rank: ag::cross_entropy_through this classifier (the core's, or
  // chapter 6's fused one), which writes the logits' gradient over them.
  ops::ClassifierFn classifier = ops::fused_classifier;
  // The LM head and its loss as one function, on one rank: the per-row losses [N] of h [..., C] (ln_f's output)
  // through `head` (the Linear tied to wte, no bias) and options.classifier, with the gradients of h and of the
  // head's weight computed inside. Chapter 7's chunked head fills it: the [..., Vp] logits are never whole.
  // Empty: the head's logits, then the loss over all of them (kept as their gradient until backward).
  using HeadLossFn = std::function<Tensor(Tape&, const Var& h, const Linear& head, const Tensor& targets, int64_t vocab,
                                          const ops::GradScale&, const ModelOptions&)>;
  HeadLossFn head_loss;
  // The embedding lookup (ag::embedding's contract) and the LM head tied to wte, logits = x @ wte^T, of a model
  // on one rank in fp32. ZeRO (chapter 7) replaces them with functions that compute the same and reduce wte's
  // gradient chunk by chunk instead of making it whole.
  using EmbeddingFn = std::function<Var(Tape&, const Tensor& tokens, const Var& wte, const Var& wpe)>;
  using LmHeadFn = std::function<Var(Tape&, const Var& x, const Var& wte)>;
  EmbeddingFn embedding;  // empty: ag::embedding, written in the activations' dtype
  LmHeadFn lm_head;       // empty, and always under mixed precision: a linear without bias (16-bit or not)
  // The parts of the pass outside the blocks, which read the root parameters: the embedding lookup (wte, wpe),
  // and the head (ln_f, then the LM head tied to wte).
  enum class RootPart { Embedding, Head };
  using RootFn = std::function<Var(Tape&, RootPart, const std::function<Var()>& compute)>;
  // Wraps a root part: called with the part and the function that computes it; empty: computed directly. ZeRO
  // stage 3 (chapter 7) records its steps around them: the sharded root parameters gathered just before use and
  // released after.
  RootFn root;
  // The communication of a tensor-parallel shard (see tensor_parallel.h); null for a model on one rank.
  std::shared_ptr<const TensorParallelFunctions> tensor_parallel;
  // The precision policy's activation dtype: the dtype of the tensors passed from op to op. f32 (the default):
  // under mixed precision only the matmuls read 16-bit operands. bf16 or f16, which must be the model's matmul
  // dtype (GPT2::set_matmul_dtype): 16-bit activations end to end. The embedding writes that dtype and every op
  // after reads and writes it, with fp32 math inside, so no conversion runs between two ops and the activations
  // take half the bytes; the parameters, their gradients, LayerNorm's statistics, softmax's sums and the losses
  // stay f32. An embedding hook or tensor-parallel lookup that computes in f32 is followed by ag::cast.
  DType activations = DType::F32;
};

// Megatron's MLP on a tensor-parallel shard: c_fc is column-parallel (this rank's hidden units), c_proj
// row-parallel (its partial sums, reduced across the ranks), c_proj(gelu(c_fc(x))) as a whole:
//   g(gelu(f(x) W_fc^T + b_fc) W_proj^T) + b_proj
// Without tensor parallelism f and g are the identity and this is the plain MLP.
Var mlp_forward(Tape& tape, const MLP& mlp, const Var& x, const ModelOptions& options);
// linear(gelu(pre)) keeping pre but not gelu(pre): backward computes gelu(pre) again, with the same kernel, for the
// weight's gradient, so its results are bitwise those of ag::gelu followed by linear.forward. In any precision the
// Linear runs in (fp32, 16-bit products, 16-bit activations). The MLP's second half under options.recompute_gelu.
Var gelu_linear_recomputing_gelu(Tape& tape, const Var& pre, const Linear& linear);
// Attention the same way, in two parts: c_attn column-parallel (this rank's heads' q, k and v) from the block's
// input, c_attn(ln_1(x)), with ln_1's output released until backward under options.recompute_layernorm; then
// attention over those heads and c_proj row-parallel.
Var attention_qkv(Tape& tape, const Block& block, const Var& x, const ModelOptions& options);
Var attention_from_qkv(Tape& tape, const CausalSelfAttention& attn, const Var& qkv, const ModelOptions& options);
// x + attn(ln_1(x)), then + mlp(ln_2(.)); both adds ag::residual_into_stream (each branch's gradient is the
// stream's buffer, no copy).
Var block_forward(Tape& tape, const Block& block, const Var& x, const ModelOptions& options);

}  // namespace lab
