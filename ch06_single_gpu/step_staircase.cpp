#include "ch06_single_gpu/step_staircase.h"

#include <algorithm>
#include <utility>

namespace lab::ch06 {

namespace {

// One rung as data: the setting it changes, and why that is faster.
struct RungChange {
  const char* name;
  const char* what_changes;
  const char* flag;
  std::string value;
  bool gpu_only;
};

}  // namespace

staircase::Staircase speed_staircase(const std::vector<std::string>& base_flags, int64_t batch, bool on_gpu) {
  const std::vector<RungChange> changes = {
      {"fp32", "the baseline: the reference kernels, fp32 GEMMs", "--dtype", "fp32", false},
      {"tf32", "TF32 tensor cores for the fp32 GEMMs (10-bit mantissa products, fp32 sums)", "--dtype", "tf32", true},
      {"bf16",
       "bf16 matmul operands, fp32 accumulation and master weights: half the bytes per operand, bf16 tensor cores",
       "--dtype", "bf16", false},
      {"fused", "the chapter's kernels: residual + LayerNorm, GEMM + bias + GELU, online-softmax classifier",
       "--kernels", "fused", false},
      {"batch x2", "twice the batch: more rows per GEMM and per kernel launch", "--batch", std::to_string(2 * batch),
       false},
  };
  staircase::Staircase stairs{"ch06", "one GPT-2 training step (forward, backward, AdamW)", base_flags, {}};
  stairs.base_flags.insert(stairs.base_flags.end(), {"--batch", std::to_string(batch), "--kernels", "reference"});
  std::vector<std::pair<std::string, std::string>> kept;  // every rung keeps the settings of the rungs below
  for (const RungChange& change : changes) {
    if (change.gpu_only && !on_gpu) continue;
    // A rung that changes a setting a lower rung made replaces its value (fp32 -> tf32 both set --dtype).
    const auto same = std::find_if(kept.begin(), kept.end(), [&](const auto& s) { return s.first == change.flag; });
    if (same != kept.end())
      same->second = change.value;
    else
      kept.emplace_back(change.flag, change.value);
    std::vector<std::string> flags;
    for (const auto& [flag, value] : kept) flags.insert(flags.end(), {flag, value});
    stairs.rungs.push_back({change.name, change.what_changes, flags});
  }
  return stairs;
}

}  // namespace lab::ch06
