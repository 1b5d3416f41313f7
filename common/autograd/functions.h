// Differentiable functions: each runs an op's forward and records the op's backward on the tape.
//
// These are the coarse building blocks of GPT-2 (linear = GEMM + bias, layernorm, attention, the fused
// classifier), so a whole GPT-2 step records only a dozen steps per layer. New implementations (fused
// kernels, flash attention, recompute) plug in as functions with these same signatures.
#pragma once

#include "common/autograd/tape.h"
#include "common/autograd/var.h"
#include "common/ops/classifier.h"
#include "common/ops/flash_attention.h"
#include "common/ops/grad_scale.h"

namespace lab::ag {

// x[b,t] = wte[tokens[b,t]] + wpe[t]                                  tokens [B,T] i32 -> [B,T,C]
// in the parameters' f32, or in `out_dtype`: bf16 or f16 for a model whose activations are 16-bit (the sum in f32,
// rounded once).
Var embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe);
Var embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe, DType out_dtype);
// x converted to `dtype` (rounded or widened); backward converts the gradient back and adds it to x's. Where a part
// that computes in f32 meets activations in 16 bits.
Var cast(Tape& tape, const Var& x, DType dtype);
// x @ w^T + b, w in [out, in] layout; b may be an undefined Var (no bias)
Var linear(Tape& tape, const Var& x, const Var& w, const Var& b);
Var layernorm(Tape& tape, const Var& x, const Var& w, const Var& b);
// `out` = layernorm(x, w, b), recomputed in backward instead of kept (recompute_in_backward, function_support.h):
// call it once out's readers are recorded. The recompute is layernorm's forward kernel on x, which its own backward
// keeps anyway, so out comes back bit for bit; the statistics it writes again go to a temporary.
void recompute_layernorm_in_backward(Tape& tape, const Var& out, const Var& x, const Var& w, const Var& b);
Var gelu(Tape& tape, const Var& x);
Var residual(Tape& tape, const Var& a, const Var& b);
// stream + branch where the branch's gradient may be the stream's own buffer (BranchGradient::SharesStream,
// function_support.h): the branch's output has no other reader, and the stream's other readers come before the
// branch in the forward, so their backward adds into that buffer only after the branch's backward has read it. The
// residual adds of a pre-LN block; the backward then moves no bytes at all.
Var residual_into_stream(Tape& tape, const Var& stream, const Var& branch);
// Causal self-attention on packed qkv [B,T,3C] -> [B,T,C], computed in f32 (16-bit qkv widened for the call and
// the output rounded back, as flash_attention does the other way).
Var attention(Tape& tape, const Var& qkv, int n_head);
// The same function by flash attention (common/ops/flash_attention.h): the tape keeps one log-sum-exp per row,
// [B, heads, T] f32, instead of the [B, heads, T, T] probabilities, and backward recomputes them tile by tile.
// `storage` is the dtype the op runs in: qkv's own, or bf16/f16 for the GPU's tensor-core kernels, in which case
// qkv is rounded to it for the call and the output widened back (so is the backward's output gradient; its qkv
// gradient is widened and added). Only the log-sum-exp is kept: backward rounds qkv and the output, which the
// tape keeps anyway as the neighbouring linears' input and output, again. CUDA with f32 storage runs the
// materialised kernels inside the op (their probabilities live for the call only). `passes`: how its backward sums
// dQ (ops::FlashBackward); `tiles`: which CUDA kernels compute it (ops::FlashTiles, the same bits whichever).
Var flash_attention(Tape& tape, const Var& qkv, int n_head, DType storage,
                    ops::FlashBackward passes = ops::FlashBackward::TwoPasses,
                    ops::FlashTiles tiles = ops::FlashTiles::Rows64);
// The same function by batched attention (common/ops/batched_attention.h): the probabilities materialised as the
// core's attention does, but in `storage` (bf16/f16: 16-bit products on tensor cores, the probabilities kept in
// 16 bits, half the bytes); qkv rounded for the call and the output widened back, as flash_attention does. With
// f32 storage it is the core's attention.
Var batched_attention(Tape& tape, const Var& qkv, int n_head, DType storage);

// Cross-entropy of logits [..., Vp] (the first `vocab` columns real; f32, bf16 or f16) against targets with one entry
// per leading position (N of them), returning the per-row losses [N] (f32). When the tape records, the gradient of
// grad_scale * mean(losses) is computed in the same pass and written over the logits, which become their own gradient
// buffer: the logits' value is no longer available afterwards. grad_scale is a number, or its value times a scale
// on the device (ops::GradScale: fp16's loss scale, which the training step keeps there); it must not be 0. This is the
// last function of a forward pass; backward() starts here.
Tensor cross_entropy(Tape& tape, const Var& logits, const Tensor& targets, int64_t vocab,
                     const ops::GradScale& grad_scale);
// The same through `classifier` (another implementation of ops::fused_classifier's contract, such as chapter 6's
// promoted kernel) instead of the core's op.
Tensor cross_entropy_through(ops::ClassifierFn classifier, Tape& tape, const Var& logits, const Tensor& targets,
                             int64_t vocab, const ops::GradScale& grad_scale);

}  // namespace lab::ag
