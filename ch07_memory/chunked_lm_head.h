// A memory rung: the LM head and its loss chunk by chunk, `--lm-head full|chunked`.
//
// What changes from the previous rung (full): the logits are never whole. The full head writes the logits of
// all N = B x T tokens, [N, Vp] (Vp = 50304 for GPT-2), and the classifier overwrites them with their gradient,
// which stays until backward reads it: at d12, B = 8, T = 1024 that is 0.82 GB in 16 bits, 1.65 GB in fp32, the
// largest tensor of the step. Chunked, the forward pass takes the rows a chunk at a time:
//
//   logits_c  = h_c @ wte^T                 [rows, Vp], one workspace buffer reused by every chunk
//   losses_c, dlogits_c                     the classifier (ModelOptions::classifier), the gradient over the logits
//   dh_c      = dlogits_c @ wte             into h's gradient [N, C], kept for backward
//   dwte     += dlogits_c^T @ h_c           into wte's gradient, now, in the forward pass
//
// since the loss is the last op, the gradient of its logits needs nothing backward knows: the loss's own
// gradient is the scale the caller passes (1/N, fp16's loss scale on the device). What the forward pass keeps is
// then dh, [N, C], instead of the [N, Vp] logits: 65x fewer bytes at GPT-2's width. The same products run, in
// the same precision, over row slices: the losses are the full head's to rounding (wte's gradient sums its
// chunks' products in another order).
//
// Costs and limits: the classifier runs in the forward pass, so an evaluation without gradients computes only
// the losses (no saving to make there beyond the chunk); wte's gradient is written before backward starts, so
// the rung refuses the layouts that reduce or gather wte themselves (ZeRO stages 2 and 3, tensor parallelism);
// more, smaller GEMMs (128-row chunks at B=8, T=1024: three GEMMs of 128 x 50304 x 768 each). When not to use
// it: when the logits are small beside the blocks' activations (short vocabularies), and when memory is not
// short. The same idea in PyTorch is Liger-Kernel's fused linear cross-entropy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/nn/modules.h"

namespace lab::ch07 {

enum class LmHead { Full, Chunked };

std::vector<std::string> lm_head_names();       // "full", "chunked"
LmHead parse_lm_head(const std::string& name);  // InvalidArgument naming the choices
const char* lm_head_name(LmHead head);

// Chunked: sets options.head_loss to chunked_head_loss in chunks of `chunk_rows` rows (0: lm_head_chunk_rows);
// Full leaves `options` unchanged. InvalidArgument on a tensor-parallel shard (options.tensor_parallel set: its
// loss is vocabulary-parallel), for negative rows, and for rows with the full head (it has no chunks).
void use_lm_head(ModelOptions& options, LmHead head, int64_t chunk_rows = 0);

// Rows per chunk, for `rows` rows of width C and a padded vocabulary of vp: a chunk's logits about as large as the
// head's input, rows / ceil(vp / C) rounded up to a multiple of 64 (whole tensor-core tiles), at most `rows`. At
// GPT-2 124M's B=8, T=1024: 128 rows, 64 chunks, 12.9 MB of bf16 logits at a time instead of 824 MB.
int64_t lm_head_chunk_rows(int64_t rows, int64_t vp, int64_t width);

// ModelOptions::HeadLossFn's contract, in chunks of `chunk_rows` rows (0: lm_head_chunk_rows). The logits of a
// chunk have h's dtype (fp32, or the 16-bit activations'), as the full head's do; under mixed precision the
// products read the 16-bit weight copy and h rounded to it, as low_precision_linear.h does.
Tensor chunked_head_loss(Tape& tape, const Var& h, const Linear& head, const Tensor& targets, int64_t vocab,
                         const ops::GradScale& grad_scale, const ModelOptions& options, int64_t chunk_rows = 0);

}  // namespace lab::ch07
