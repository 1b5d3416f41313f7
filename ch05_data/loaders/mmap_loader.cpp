#include "ch05_data/loaders/mmap_loader.h"

namespace lab::ch05 {

MmapLoader::MmapLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options)
    : BatchLoader(shard_paths, options), shards_(plan().shards()) {}

// Copying out of the mapping (rather than widening from it in place) keeps one code path for batches that
// straddle two shards; the copy is where any page faults are taken.
void MmapLoader::fetch(int64_t k, Tensor& inputs, Tensor& targets) {
  read_batch_here(plan(), k, shards_, buffer_, inputs, targets);
}

}  // namespace lab::ch05
