#include "ch05_data/loaders/make_loader.h"

#include "ch05_data/loaders/mmap_loader.h"
#include "ch05_data/loaders/prefetch_loader.h"
#ifdef LAB_WITH_CUDA
#include "ch05_data/loaders/pinned_loader.h"
#endif

namespace lab::ch05 {

namespace {

// Why the pinned stage cannot run for `device` here; empty when it can.
std::string pinned_unavailable(Device device) {
#ifdef LAB_WITH_CUDA
  if (!device.is_cuda()) return cat("the batches are for ", device.str(), ", so there is no copy to a GPU to hide");
  if (!cuda_available()) return "no CUDA GPU is visible";
  return "";
#else
  return cat("this build has no CUDA backend (batches for ", device.str(), ")");
#endif
}

}  // namespace

const std::vector<std::string>& loader_stages() {
  static const std::vector<std::string> stages = {"sync", "mmap", "prefetch", "pinned"};
  return stages;
}

std::unique_ptr<BatchLoader> make_loader(const std::string& stage, const std::vector<std::string>& shard_paths,
                                         const LoaderOptions& options, Device device) {
  if (stage == "sync") return std::make_unique<SyncLoader>(shard_paths, options);
  if (stage == "mmap") return std::make_unique<MmapLoader>(shard_paths, options);
  if (stage == "prefetch") return std::make_unique<PrefetchLoader>(shard_paths, options);
  if (stage == "pinned") {
    const std::string why = pinned_unavailable(device);
#ifdef LAB_WITH_CUDA
    if (why.empty()) return std::make_unique<PinnedLoader>(shard_paths, options, device);
#endif
    report(options, cat("data: the pinned loader cannot run: ", why, "; using the prefetch loader (stage 3)"));
    return std::make_unique<PrefetchLoader>(shard_paths, options);
  }
  fail(ErrorKind::InvalidArgument, "unknown loader stage '", stage, "' (expected sync, mmap, prefetch or pinned)");
}

}  // namespace lab::ch05
