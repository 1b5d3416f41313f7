// The offloaded optimizer (see offload_optimizer.h).
#include "ch07_memory/offload_optimizer.h"

namespace lab::ch07 {

std::unique_ptr<AdamW> make_offloaded_optimizer(GPT2& model, const AdamWConfig& config, int64_t chunk_elements) {
  return std::make_unique<AdamW>(model.parameters(), config, OptimizerState::Host, chunk_elements);
}

}  // namespace lab::ch07
