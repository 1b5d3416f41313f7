// Chapter 5's data loaders, one interface (BatchLoader, common/data/loader.h), chosen by name:
//
//   1 "sync"      SyncLoader (common/data/loader.h): positioned read() of each batch on the caller's thread
//   2 "mmap"      MmapLoader (mmap_loader.h): shards mapped once, batches copied out of the page cache
//   3 "prefetch"  PrefetchLoader (prefetch_loader.h): reader threads fill a bounded queue ahead of the
//                 consumer
//   4 "pinned"    PinnedLoader (pinned_loader.h): stage 3 into pinned memory, asynchronous double-buffered
//                 copies on a copy stream, u16 widened to i32 on the GPU (CUDA builds, GPU targets only)
//
// Every stage follows the same BatchPlan, so all four hand out identical batches: sharded by rank,
// shuffled from the seed, resumable from position() with seek(), with the same errors for bad shards.
// Each stage pays LoaderOptions::slow where it really would: stages 1-2 on the caller's thread, stages
// 3-4 on the reader threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/data/loader.h"

namespace lab::ch05 {

// The stage names in order: sync, mmap, prefetch, pinned.
const std::vector<std::string>& loader_stages();

// The loader of `stage` for batches on `device`. "pinned" needs a CUDA build and a GPU `device`; without
// them it reports why through options.log, once, and returns the prefetch loader (stage 3) instead.
// Error(InvalidArgument) for an unknown stage; errors of the shards name the file.
std::unique_ptr<BatchLoader> make_loader(const std::string& stage, const std::vector<std::string>& shard_paths,
                                         const LoaderOptions& options, Device device);

}  // namespace lab::ch05
