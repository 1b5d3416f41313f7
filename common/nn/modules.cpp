#include "common/nn/modules.h"

namespace lab {

Var mlp_forward(Tape& tape, const MLP& mlp, const Var& x) {
  return mlp.c_proj.forward(tape, ag::gelu(tape, mlp.c_fc.forward(tape, x)));
}

Var attention_forward(Tape& tape, const CausalSelfAttention& attn, const Var& x, const ModelOptions& options) {
  const Var qkv = attn.c_attn.forward(tape, x);
  return attn.c_proj.forward(tape, options.attention(tape, qkv, attn.n_head));
}

Var block_forward(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const Var h = ag::residual(tape, x, attention_forward(tape, block.attn, block.ln_1.forward(tape, x), options));
  const Var m = block.ln_2.forward(tape, h);
  return ag::residual(tape, h, options.mlp ? options.mlp(tape, block.mlp, m) : mlp_forward(tape, block.mlp, m));
}

}  // namespace lab
