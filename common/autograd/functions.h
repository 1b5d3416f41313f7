// Differentiable functions: each runs an op's forward and records the op's backward on the tape.
//
// These are the coarse building blocks of GPT-2 (linear = GEMM + bias, layernorm, attention, the fused
// classifier), so a whole GPT-2 step records only a dozen steps per layer. New implementations (fused
// kernels, flash attention, recompute) plug in as functions with these same signatures.
#pragma once

#include "common/autograd/tape.h"
#include "common/autograd/var.h"

namespace lab::ag {

// x[b,t] = wte[tokens[b,t]] + wpe[t]                                  tokens [B,T] i32 -> [B,T,C]
Var embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe);
// x @ w^T + b, w in [out, in] layout; b may be an undefined Var (no bias)
Var linear(Tape& tape, const Var& x, const Var& w, const Var& b);
Var layernorm(Tape& tape, const Var& x, const Var& w, const Var& b);
Var gelu(Tape& tape, const Var& x);
Var residual(Tape& tape, const Var& a, const Var& b);
// Causal self-attention on packed qkv [B,T,3C] -> [B,T,C]
Var attention(Tape& tape, const Var& qkv, int n_head);

// Cross-entropy of logits [..., Vp] (the first `vocab` columns real) against targets with one entry per
// leading position (N of them), returning the per-row losses [N]. When the tape records, the gradient of grad_scale *
// mean(losses) is computed in the same pass and written over the logits, which become their own gradient buffer: the
// logits' value is no longer available afterwards. This is the last function of a forward pass; backward() starts here.
Tensor cross_entropy(Tape& tape, const Var& logits, const Tensor& targets, int64_t vocab, float grad_scale);

}  // namespace lab::ag
