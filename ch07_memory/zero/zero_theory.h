// What a ZeRO rank holds of parameters, gradients and optimizer state at its peak, in theory: the stage's share
// of the bytes per parameter (zero_step.h's table), and, by name, what is whole beside the shards.
//
//   stage  whole beside the shards at the peak
//   0, 1   nothing: the parameters and gradients are whole anyway
//   2      the gradients in flight: the bucket being filled, or at the lookup wpe's and a chunk of wte's
//          (wte's gradient is made and reduced in chunks of a bucket: zero/tied_embedding_gradient.h)
//   3      the same with a block for a bucket (the units' gradients, wte's chunks), and the largest unit's
//          weights while it is used (wte with wpe for the lookup, or a block); with prefetch, the unit gathered
//          ahead beside it (a block: beside the lookup block 0, beside a block the next one or wte)
//
// The peaks of the three categories need not come at the same moment: these are upper bounds of each, added up
// as the measured peaks are. The bench's measured rows and its table for an 80 GB GPU both read this.
#pragma once

#include <cstdint>
#include <string>

#include "common/nn/config.h"

namespace lab::ch07 {

// Bytes of parameters, gradients and optimizer state per rank at ZeRO stage `stage` (0: data parallelism) over
// `ranks` ranks, for Ψ = `parameters` fp32 parameters: 16Ψ, 8Ψ + 8Ψ/D, 4Ψ + 12Ψ/D, 16Ψ/D (stages 3 and up).
double zero_state_bytes(int stage, int64_t parameters, int ranks);

struct ZeroWhole {
  std::string what;  // "bucket in flight", "wte+wpe gathered", "block prefetched", ...
  double bytes = 0;
};

struct ZeroStateTheory {
  double sharded = 0;  // the stage's formula (zero_state_bytes, or its mixed-precision form): the three below
  double params = 0, grads = 0, optimizer = 0;  // each category's share of it
  // What is whole beside the shards at the peak, by name; 0 bytes where the stage holds none.
  ZeroWhole grads_in_flight;  // stages 2 and 3
  ZeroWhole unit_gathered;    // stage 3
  ZeroWhole unit_prefetched;  // stage 3 with prefetch
  double whole_bytes() const { return grads_in_flight.bytes + unit_gathered.bytes + unit_prefetched.bytes; }
  double total() const { return sharded + whole_bytes(); }
  // "block in flight 30.0 + wte+wpe gathered 150.4" in MiB; "-" when nothing is.
  std::string whole_str() const;
};

struct ZeroSetting {
  int stage = 0;  // 0: data parallelism
  int ranks = 1;
  int64_t bucket_bytes = 25 << 20;  // stages 1 and 2's buckets
  bool prefetch = false;            // stage 3's
};

// For GPT-2 `config` (its padded vocabulary) with Ψ = `parameters` elements of its flat buffer. `weight_bytes` per
// element of parameters and gradients: 4 (fp32, AdamW's moments 8 more) or 2 (bf16, with fp32 master weights
// and moments: 12 more, the ZeRO paper's 2 + 2 + 12).
ZeroStateTheory zero_state_theory(const GPT2Config& config, int64_t parameters, const ZeroSetting& setting,
                                  int64_t weight_bytes = 4);

}  // namespace lab::ch07
