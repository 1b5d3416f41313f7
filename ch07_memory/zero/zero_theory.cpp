// ZeRO's per-rank state in theory, by name (see zero_theory.h).
#include "ch07_memory/zero/zero_theory.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/nn/gpt2.h"

namespace lab::ch07 {

namespace {

// The stage's formula by category: `weight_bytes` per parameter for the parameters and for the gradients, the
// rest of 16 for the optimizer state, each divided by the ranks from the stage that shards it.
void set_sharded(ZeroStateTheory& t, int stage, int64_t parameters, int ranks, int64_t weight_bytes) {
  const double psi = static_cast<double>(parameters), d = ranks, w = static_cast<double>(weight_bytes);
  t.params = stage >= 3 ? w * psi / d : w * psi;
  t.grads = stage >= 2 ? w * psi / d : w * psi;
  t.optimizer = stage >= 1 ? (16 - 2 * w) * psi / d : (16 - 2 * w) * psi;
  t.sharded = t.params + t.grads + t.optimizer;
}

}  // namespace

double zero_state_bytes(int stage, int64_t parameters, int ranks) {
  ZeroStateTheory t;
  set_sharded(t, stage, parameters, ranks, 4);
  return t.sharded;
}

std::string ZeroStateTheory::whole_str() const {
  std::string out;
  for (const ZeroWhole& w : {grads_in_flight, unit_gathered, unit_prefetched}) {
    if (w.bytes == 0) continue;
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f", w.bytes / (1024.0 * 1024.0));
    out += (out.empty() ? "" : " + ") + w.what + " " + mib;
  }
  return out.empty() ? "-" : out;
}

ZeroStateTheory zero_state_theory(const GPT2Config& config, int64_t parameters, const ZeroSetting& setting,
                                  int64_t weight_bytes) {
  // Elements of the embeddings, of the largest block, of the largest parameter outside the embeddings, and of
  // everything outside the embeddings.
  double wte = 0, wpe = 0, largest_param = 0, rest = 0;
  std::map<int, double> blocks;
  for (const GPT2Parameter& p : gpt2_parameters(config, config.padded_vocab_size)) {
    const auto n = static_cast<double>(shape_numel(p.shape));
    if (p.name == "wte.weight") {
      wte = n;
    } else if (p.name == "wpe.weight") {
      wpe = n;
    } else {
      largest_param = std::max(largest_param, n);
      rest += n;
    }
    if (p.block >= 0) blocks[p.block] += n;
  }
  double block = 0;
  for (const auto& [i, n] : blocks) block = std::max(block, n);

  ZeroStateTheory t;
  const double w = static_cast<double>(weight_bytes);
  const int stage = setting.stage;
  set_sharded(t, stage, parameters, setting.ranks, weight_bytes);
  if (stage < 2) return t;
  // The gradients in flight: the bucket being filled, of at most bucket_bytes of whole parameters (or one larger
  // parameter; the operation that completes it may already have made the next bucket's first parameter, a
  // weight's bias); at the lookup, wpe's gradient and a chunk of wte's, at most a bucket (stage 3: a block).
  const double cap = static_cast<double>(setting.bucket_bytes) / 4;  // the buckets are cut in fp32 elements
  const double bucket = stage >= 3 ? block : std::min(rest, std::max(cap, largest_param) + largest_param);
  const double chunk = std::min(wte, stage >= 3 ? block : cap);
  t.grads_in_flight = {stage >= 3 ? "block in flight" : "bucket in flight", w * std::max(bucket, wpe + chunk)};
  if (stage < 3) return t;
  t.unit_gathered = {wte + wpe >= block ? "wte+wpe gathered" : "block gathered", w * std::max(wte + wpe, block)};
  if (setting.prefetch) t.unit_prefetched = {"block prefetched", w * block};
  return t;
}

}  // namespace lab::ch07
