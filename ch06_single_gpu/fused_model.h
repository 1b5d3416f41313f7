// --kernels reference|fused: which kernels a GPT-2 runs. `fused` swaps the chapter's promoted ops into the
// model through its ModelOptions hooks (common/nn/modules.h), so the core never knows them:
//
//   block           x + attn(ln_1(x)) and ln_2 of it as one op (residual_layernorm: the sum written once, never
//                   read back for the normalisation), then the MLP below, then the second residual add
//   mlp             c_fc's GEMM with its bias and GELU as one op (matmul_bias_gelu: the cuBLASLt epilogue on
//                   CUDA, so the 4C-wide hidden activation is written once), then c_proj
//   classifier      the fused classifier with the online softmax (one read of each logits row fewer on CUDA)
//
// With 16-bit matmul operands (--dtype bf16|fp16) the MLP stays the mixed-precision linears; the residual +
// LayerNorm and the classifier, fp32 in mixed precision too, stay fused.
//
// What stays the core's: the embeddings, ln_1 (its input comes from the block before, across the hook's
// boundary), attention, the linears without an epilogue, and AdamW (already one pass over the flat buffer,
// common/optim/adamw.h). The results are the reference model's to rounding, on both backends.
#pragma once

#include <string>

#include "common/nn/gpt2.h"

namespace lab::ch06 {

enum class Kernels { Reference, Fused };

// "reference" or "fused"; anything else: Error(InvalidArgument) naming the choices.
Kernels parse_kernels(const std::string& name);
const char* kernels_name(Kernels kernels);

// `options` with the fused hooks set (Kernels::Fused), or as given (Reference). The fused kernels run on one
// tensor-parallel rank only: with options.tensor_parallel set, Error(InvalidArgument).
ModelOptions with_kernels(ModelOptions options, Kernels kernels);

// The same for a model already built (the trainer builds its model, or its shard, first).
void use_kernels(GPT2& model, Kernels kernels);

}  // namespace lab::ch06
