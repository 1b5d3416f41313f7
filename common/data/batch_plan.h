// Which tokens make up each batch: the one deterministic schedule every data loader follows.
//
// The shards of a split are read as one concatenated token stream. Unshuffled, in a single process,
// batch i of B x T reads the B*T+1 tokens that start at i*B*T of the stream: row b holds the inputs
// tok[s + b*T .. s + b*T + T) and the targets shifted by one. An epoch has floor((tokens - 1) / (B*T))
// batches.
//
// With several ranks, the epoch's batches are dealt round-robin (batch j goes to rank j % world) and every
// rank gets floor(batches / world) of them, so ranks read disjoint data and stay in step. World ranks with
// batch B thus read, between them, exactly the rows of one process with batch world x B: rank r's k-th
// batch is rows [r B, (r+1) B) of that process's k-th batch (data parallelism relies on it).
// With shuffling, each epoch permutes the shard order and then the positions of those global batches (world
// consecutive batches, moved together), both from (seed, epoch), so any process can compute any epoch's order
// without communication, and the equality above holds shuffled too.
//
// A loader's whole state is one integer, the number of batches it has handed out: batch k of a rank is
// batch k % per_epoch of epoch k / per_epoch. That makes exact resume a matter of saving that integer.
// Epochs follow one another without end; loaders report each new epoch when its first batch is handed
// out, so running past the end of the data is never silent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/data/slow_source.h"
#include "common/io/shards.h"

namespace lab {

struct LoaderOptions {
  int64_t batch = 4;  // B
  int64_t seq = 64;   // T
  int rank = 0;
  int world = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  // Loaders that read in the background (chapter 5): reader threads, and how many batches they may
  // hold ready ahead of the consumer.
  int workers = 2;
  int depth = 4;
  // A simulated slow source (slow_source.h), off by default.
  SlowSource slow;
  // Where a loader reports events (a new epoch begins, a stage falls back to another); empty: stdout.
  std::function<void(const std::string&)> log;
};

// A contiguous run of tokens inside one shard.
struct ShardPiece {
  int shard = 0;       // index into BatchPlan::shards()
  int64_t offset = 0;  // first token within the shard
  int64_t count = 0;
};

class BatchPlan {
 public:
  BatchPlan(const BatchPlan&) = delete;
  BatchPlan& operator=(const BatchPlan&) = delete;
  // Reads every shard's header (Error(Format/Io) naming a bad file); throws InvalidArgument when the
  // split is too small for even one batch per rank.
  BatchPlan(const std::vector<std::string>& shard_paths, const LoaderOptions& options);

  const LoaderOptions& options() const { return options_; }
  const std::vector<ShardInfo>& shards() const { return shards_; }
  int64_t total_tokens() const { return total_tokens_; }
  int64_t batch_tokens() const { return options_.batch * options_.seq; }
  int64_t batches_per_epoch() const { return per_rank_; }  // for this rank
  int64_t epoch_of(int64_t k) const { return k / per_rank_; }

  // The B*T+1 tokens of this rank's k-th batch, as pieces of shards in stream order.
  std::vector<ShardPiece> pieces(int64_t k) const;
  // Offset in the epoch's stream where this rank's k-th batch starts (for tests and logging).
  int64_t stream_offset(int64_t k) const;

 private:
  std::vector<int> shard_order(int64_t epoch) const;

  LoaderOptions options_;
  std::vector<ShardInfo> shards_;
  int64_t total_tokens_ = 0;
  int64_t per_epoch_ = 0;  // batches in an epoch, all ranks together
  int64_t per_rank_ = 0;
  // Batch permutations of the two most recent epochs asked for: readers that run ahead of the consumer
  // straddle an epoch boundary, and each permutation costs O(batches per epoch) to compute.
  struct Permutation {
    int64_t epoch = -1;
    std::vector<int64_t> order;
  };
  const std::vector<int64_t>& permutation(int64_t epoch) const;  // call with perm_mutex_ held
  mutable std::mutex perm_mutex_;                                // loaders may ask from several threads
  mutable std::array<Permutation, 2> perms_;
  mutable size_t perm_oldest_ = 0;
};

// Reports `line` through options.log, or on stdout when none is set.
void report(const LoaderOptions& options, const std::string& line);

// Splits B*T+1 contiguous tokens into int32 inputs [B*T] and targets [B*T] (row b: tokens b*T .. b*T+T).
void tokens_to_batch(const uint16_t* tokens, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets);

}  // namespace lab
