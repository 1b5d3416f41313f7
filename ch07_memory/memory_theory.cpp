// The theoretical bytes of a GPT-2 step by category (see memory_theory.h).
#include "ch07_memory/memory_theory.h"

namespace lab::ch07 {

int64_t MemoryTheory::total() const {
  int64_t sum = 0;
  for (const int64_t b : bytes) sum += b;
  return sum;
}

MemoryTheory memory_theory(const GPT2Config& config, int64_t batch, int64_t seq, RecomputePolicy policy,
                           int64_t bytes_per_element, bool flash_attention) {
  const int64_t C = config.n_embd, L = config.n_layer, H = config.n_head, Vp = config.padded_vocab_size;
  MemoryTheory t;
  t.parameters = config.num_parameters() + (Vp - config.vocab_size) * C;
  // What attention keeps per token beside qkv and its output: the probabilities' rows, or flash attention's
  // log-sum-exp per head (f32, one element at fp32; counted as such, it is exact for fp32 runs).
  const int64_t attention_kept = flash_attention ? H : H * seq;
  switch (policy) {
    case RecomputePolicy::None: t.activation_elements_per_token_per_block = 18 * C + 4 + attention_kept; break;
    case RecomputePolicy::Selective:
      t.activation_elements_per_token_per_block = 14 * C + 4 + (flash_attention ? H : 0);
      break;
    case RecomputePolicy::Block: t.activation_elements_per_token_per_block = C; break;
  }
  t.activation_elements_per_token_outside = 2 * C + 3 + Vp;
  if (policy == RecomputePolicy::Block)
    t.recomputed_block_bytes = batch * seq * (18 * C + 4 + attention_kept) * bytes_per_element;
  auto set = [&](MemCategory c, int64_t b) { t.bytes[static_cast<int>(c)] = b; };
  set(MemCategory::Params, t.parameters * bytes_per_element);
  set(MemCategory::Grads, t.parameters * bytes_per_element);
  // AdamW's two fp32 moments, and an fp32 master copy of the weights when they are kept in 16 bits.
  set(MemCategory::Optimizer, (bytes_per_element < 4 ? 3 : 2) * t.parameters * 4);
  set(MemCategory::Activations,
      batch * seq * (L * t.activation_elements_per_token_per_block + t.activation_elements_per_token_outside) *
          bytes_per_element);
  return t;
}

}  // namespace lab::ch07
