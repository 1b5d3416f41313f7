// The theoretical bytes of a GPT-2 step by category (see memory_theory.h).
#include "ch07_memory/memory_theory.h"

namespace lab::ch07 {

int64_t MemoryTheory::total() const {
  int64_t sum = 0;
  for (const int64_t b : bytes) sum += b;
  return sum;
}

MemoryTheory memory_theory(const GPT2Config& config, int64_t batch, int64_t seq, RecomputePolicy policy,
                           int64_t bytes_per_element, AttentionKept attention, int64_t activation_bytes,
                           int64_t matmul_copy_bytes, LmHead head) {
  const int64_t C = config.n_embd, L = config.n_layer, H = config.n_head, Vp = config.padded_vocab_size;
  const int64_t act = activation_bytes > 0 ? activation_bytes : bytes_per_element;
  constexpr int64_t kStatistic = 4;  // LayerNorm's mean and rstd, the loss: fp32 whatever the activations
  MemoryTheory t;
  t.parameters = config.num_parameters() + (Vp - config.vocab_size) * C;
  // Attention's own share per head and token: the probabilities' row, or flash attention's f32 log-sum-exp.
  const int64_t attention_bytes = attention == AttentionKept::LogSumExp           ? 4
                                  : attention == AttentionKept::HalfProbabilities ? 2 * seq
                                  : attention == AttentionKept::F32Probabilities  ? 4 * seq
                                                                                  : act * seq;
  // A whole block's elements apart from its 4 statistics, for none and for the selective policies.
  int64_t block_elements = 16 * C, block_statistics = 4;
  switch (policy) {
    case RecomputePolicy::None: t.attention_bytes_per_token_per_block = H * attention_bytes; break;
    case RecomputePolicy::Selective:           // drops the probabilities; flash attention's log-sum-exp stays
    case RecomputePolicy::SelectiveLayerNorm:  // and the two LayerNorms' outputs (their statistics stay)
      block_elements = policy == RecomputePolicy::Selective ? 12 * C : 10 * C;
      t.attention_bytes_per_token_per_block = attention == AttentionKept::LogSumExp ? H * attention_bytes : 0;
      break;
    case RecomputePolicy::Block: block_elements = C, block_statistics = 0; break;
  }
  t.activation_elements_per_token_per_block = block_elements + block_statistics;
  // Outside the blocks: the embedding output, ln_f's statistics and the loss, and the head's share: ln_f's output
  // (which the LM head reads) and the logits (their own gradient), or, chunked, the gradient of ln_f's output
  // (computed in forward; ln_f's output itself is not kept).
  const int64_t head_elements = head == LmHead::Chunked ? C : C + Vp;
  t.activation_elements_per_token_outside = C + 3 + head_elements;
  const int64_t block_bytes = block_elements * act + block_statistics * kStatistic;
  const int64_t outside_bytes = (C + head_elements) * act + 3 * kStatistic;
  t.activation_bytes_per_token = L * (block_bytes + t.attention_bytes_per_token_per_block) + outside_bytes;
  if (policy == RecomputePolicy::Block)
    t.recomputed_block_bytes = batch * seq * (16 * C * act + 4 * kStatistic + H * attention_bytes);
  auto set = [&](MemCategory c, int64_t b) { t.bytes[static_cast<int>(c)] = b; };
  set(MemCategory::Params, t.parameters * (bytes_per_element + matmul_copy_bytes));
  set(MemCategory::Grads, t.parameters * bytes_per_element);
  // AdamW's two fp32 moments, and an fp32 master copy of the weights when they are kept in 16 bits.
  set(MemCategory::Optimizer, (bytes_per_element < 4 ? 3 : 2) * t.parameters * 4);
  set(MemCategory::Activations, batch * seq * t.activation_bytes_per_token);
  return t;
}

}  // namespace lab::ch07
