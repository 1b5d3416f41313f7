#include "ch05_data/loaders/prefetch_loader.h"

namespace lab::ch05 {

std::vector<uint16_t*> carve_slots(uint16_t* memory, int count, int64_t size) {
  std::vector<uint16_t*> slots;
  for (int s = 0; s < count; ++s) slots.push_back(memory + s * size);
  return slots;
}

PrefetchLoader::PrefetchLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options)
    : BatchLoader(shard_paths, options),
      files_(plan().shards()),
      slot_memory_(static_cast<size_t>((options.depth + 1) * (plan().batch_tokens() + 1))),
      prefetcher_(plan(), files_, carve_slots(slot_memory_.data(), options.depth + 1, plan().batch_tokens() + 1)) {}

void PrefetchLoader::fetch(int64_t k, Tensor& inputs, Tensor& targets) {
  const LoaderOptions& o = plan().options();
  const int slot = prefetcher_.take(k);
  struct Release {  // the slot goes back to the readers however this function is left
    BatchPrefetcher& prefetcher;
    int slot;
    ~Release() { prefetcher.release(slot); }
  } release{prefetcher_, slot};
  ensure_batch_tensors(inputs, targets, o.batch, o.seq, Device::cpu());
  tokens_to_batch(prefetcher_.tokens(slot), o.batch, o.seq, inputs.data<int32_t>(), targets.data<int32_t>());
}

}  // namespace lab::ch05
