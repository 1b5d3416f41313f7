#include "common/data/batch_plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "common/core/error.h"
#include "common/util/rng.h"

namespace lab {

namespace {

// Fisher-Yates with the project's RNG: identical on every platform (std::shuffle is not specified).
template <typename T>
void shuffle_in_place(std::vector<T>& v, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

uint64_t epoch_seed(uint64_t seed, int64_t epoch, uint64_t salt) {
  return seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch) * 0xbf58476d1ce4e5b9ull + salt;
}

}  // namespace

BatchPlan::BatchPlan(const std::vector<std::string>& shard_paths, const LoaderOptions& options) : options_(options) {
  LAB_CHECK(options.batch > 0 && options.seq > 0, InvalidArgument,
            "loader: batch and sequence length must be "
            "positive (got ",
            options.batch, " x ", options.seq, ")");
  LAB_CHECK(options.world > 0 && options.rank >= 0 && options.rank < options.world, InvalidArgument, "loader: rank ",
            options.rank, " is outside a world of ", options.world);
  LAB_CHECK(options.workers >= 1 && options.depth >= 1, InvalidArgument, "loader: workers (", options.workers,
            ") and depth (", options.depth, ") must be at least 1");
  LAB_CHECK(options.slow.read_latency_us >= 0 && options.slow.preprocess_us >= 0, InvalidArgument,
            "loader: the simulated read latency (", options.slow.read_latency_us, " us) and preprocessing (",
            options.slow.preprocess_us, " us) cannot be negative");
  LAB_CHECK(!shard_paths.empty(), InvalidArgument, "loader: no shards given");
  for (const std::string& path : shard_paths) {
    shards_.push_back(read_shard_info(path));
    total_tokens_ += shards_.back().num_tokens;
  }
  per_epoch_ = total_tokens_ > 0 ? (total_tokens_ - 1) / batch_tokens() : 0;
  per_rank_ = per_epoch_ / options.world;
  LAB_CHECK(per_rank_ > 0, InvalidArgument, "loader: ", total_tokens_, " tokens in ", shards_.size(), " shard(s) (",
            shard_paths.front(), " ...) are too few for one batch of ", options.batch, " x ", options.seq,
            " per rank (", options.world, " rank(s))");
}

std::vector<int> BatchPlan::shard_order(int64_t epoch) const {
  std::vector<int> order(shards_.size());
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) shuffle_in_place(order, epoch_seed(options_.seed, epoch, 1));
  return order;
}

const std::vector<int64_t>& BatchPlan::permutation(int64_t epoch) const {
  for (const Permutation& p : perms_)
    if (p.epoch == epoch) return p.order;
  Permutation& p = perms_[perm_oldest_];
  perm_oldest_ = 1 - perm_oldest_;
  p.epoch = epoch;
  p.order.resize(static_cast<size_t>(per_rank_));
  std::iota(p.order.begin(), p.order.end(), 0);
  shuffle_in_place(p.order, epoch_seed(options_.seed, epoch, 2));
  return p.order;
}

int64_t BatchPlan::stream_offset(int64_t k) const {
  LAB_CHECK(k >= 0, InvalidArgument, "loader: negative batch index ", k);
  const int64_t epoch = k / per_rank_;
  // The epoch's k-th global batch (one batch of every rank), shuffled as a whole: rank r takes its r-th
  // part, so that world ranks with batch B read the rows of one process with batch world x B.
  int64_t global = k % per_rank_;
  if (options_.shuffle) {
    std::lock_guard<std::mutex> lock(perm_mutex_);
    global = permutation(epoch)[static_cast<size_t>(global)];
  }
  return (global * options_.world + options_.rank) * batch_tokens();
}

std::vector<ShardPiece> BatchPlan::pieces(int64_t k) const {
  int64_t offset = stream_offset(k);
  int64_t need = batch_tokens() + 1;
  std::vector<ShardPiece> out;
  for (int s : shard_order(epoch_of(k))) {
    const int64_t n = shards_[static_cast<size_t>(s)].num_tokens;
    if (offset >= n) {
      offset -= n;
      continue;
    }
    const int64_t take = std::min(need, n - offset);
    out.push_back({s, offset, take});
    need -= take;
    offset = 0;
    if (need == 0) break;
  }
  LAB_ASSERT(need == 0);
  return out;
}

void report(const LoaderOptions& options, const std::string& line) {
  if (options.log) {
    options.log(line);
    return;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void tokens_to_batch(const uint16_t* tokens, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      inputs[b * seq + t] = tokens[b * seq + t];
      targets[b * seq + t] = tokens[b * seq + t + 1];
    }
}

}  // namespace lab
