// The theoretical bytes of a GPT-2 step by category (see memory_theory.h).
#include "ch07_memory/memory_theory.h"

namespace lab::ch07 {

int64_t MemoryTheory::total() const {
  int64_t sum = 0;
  for (const int64_t b : bytes) sum += b;
  return sum;
}

MemoryTheory memory_theory(const GPT2Config& config, int64_t batch, int64_t seq, RecomputePolicy policy,
                           int64_t bytes_per_element, AttentionKept attention) {
  const int64_t C = config.n_embd, L = config.n_layer, H = config.n_head, Vp = config.padded_vocab_size;
  MemoryTheory t;
  t.parameters = config.num_parameters() + (Vp - config.vocab_size) * C;
  // Attention's own share per head and token: the probabilities' row, or flash attention's f32 log-sum-exp.
  const int64_t attention_bytes = attention == AttentionKept::LogSumExp           ? 4
                                  : attention == AttentionKept::HalfProbabilities ? 2 * seq
                                                                                  : bytes_per_element * seq;
  switch (policy) {
    case RecomputePolicy::None:
      t.activation_elements_per_token_per_block = 18 * C + 4;
      t.attention_bytes_per_token_per_block = H * attention_bytes;
      break;
    case RecomputePolicy::Selective:  // drops the probabilities; flash attention's log-sum-exp stays
      t.activation_elements_per_token_per_block = 14 * C + 4;
      t.attention_bytes_per_token_per_block = attention == AttentionKept::LogSumExp ? H * attention_bytes : 0;
      break;
    case RecomputePolicy::Block: t.activation_elements_per_token_per_block = C; break;
  }
  t.activation_elements_per_token_outside = 2 * C + 3 + Vp;
  if (policy == RecomputePolicy::Block)
    t.recomputed_block_bytes = batch * seq * ((18 * C + 4) * bytes_per_element + H * attention_bytes);
  auto set = [&](MemCategory c, int64_t b) { t.bytes[static_cast<int>(c)] = b; };
  set(MemCategory::Params, t.parameters * bytes_per_element);
  set(MemCategory::Grads, t.parameters * bytes_per_element);
  // AdamW's two fp32 moments, and an fp32 master copy of the weights when they are kept in 16 bits.
  set(MemCategory::Optimizer, (bytes_per_element < 4 ? 3 : 2) * t.parameters * 4);
  set(MemCategory::Activations,
      batch * seq *
          (L * (t.activation_elements_per_token_per_block * bytes_per_element + t.attention_bytes_per_token_per_block) +
           t.activation_elements_per_token_outside * bytes_per_element));
  return t;
}

}  // namespace lab::ch07
