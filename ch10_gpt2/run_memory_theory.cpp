// Every rung's share of a run's memory theory (see run_memory_theory.h).
#include "ch10_gpt2/run_memory_theory.h"

#include <cmath>

#include "ch07_memory/zero/zero_theory.h"
#include "ch09_advanced/attention_choice.h"

namespace lab {

ch07::MemoryTheory run_memory_theory(const RunConfig& config, int64_t batch, int64_t seq) {
  const DType matmul = matmul_dtype(config.math);
  const DType activations = config.rungs.activations_16bit ? matmul : DType::F32;
  const int64_t copy_bytes = matmul == DType::F32 ? 0 : static_cast<int64_t>(dtype_size(matmul));  // per parameter
  ch07::MemoryTheory t = ch07::memory_theory(config.model, batch, seq, config.rungs.recompute, 4,
                                             ch09::attention_kept(config.rungs.attention, matmul, activations),
                                             static_cast<int64_t>(dtype_size(activations)), copy_bytes);
  const auto set = [&](MemCategory c, int64_t bytes) { t.bytes[static_cast<int>(c)] = bytes; };
  const MemoryStepOptions& memory = config.memory;
  if (memory.optimizer_in_backward) set(MemCategory::Grads, config.model.padded_vocab_for(1) * config.model.n_embd * 4);
  if (memory.offload_optimizer && config.device.is_cuda()) set(MemCategory::Optimizer, 0);
  if (memory.zero > 0) {
    const ch07::ZeroStateTheory zero = ch07::zero_state_theory(
        config.model, t.parameters,
        {memory.zero, config.parallel.layout.dp, config.parallel.bucket_bytes, memory.zero_prefetch});
    const auto bytes = [](double b) { return static_cast<int64_t>(std::llround(b)); };
    // The matmuls' 16-bit copy stays whole (stage 3, which would shard it, refuses 16-bit matmuls).
    set(MemCategory::Params,
        bytes(zero.params + zero.unit_gathered.bytes + zero.unit_prefetched.bytes) + copy_bytes * t.parameters);
    set(MemCategory::Grads, bytes(zero.grads + zero.grads_in_flight.bytes));
    set(MemCategory::Optimizer, bytes(zero.optimizer));
  }
  return t;
}

}  // namespace lab
