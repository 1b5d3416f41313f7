// GPT-2 model configurations: the four published sizes (d12 = 124M ... d48 = 1.5B) and small ones for
// CPU training and tests. The vocabulary is padded internally to a multiple of 128 (50257 -> 50304) so the
// LM-head GEMM has friendly shapes; the loss only ever looks at the real `vocab_size` columns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace lab {

struct GPT2Config {
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int block_size = 1024;   // maximum sequence length (rows of wpe)
  int vocab_size = 50257;  // real vocabulary
  int padded_vocab_size = 50304;

  // "d12", "d24", "d36", "d48" (GPT-2 124M/350M/774M/1558M), "small" (4 layers, 128 wide: the default
  // CPU run), "tiny" (2 layers, 64 wide: tests). Throws InvalidArgument listing the names otherwise.
  static GPT2Config from_name(const std::string& name);
  static std::vector<std::string> names();
  static int64_t pad_vocab(int64_t vocab) { return (vocab + 127) / 128 * 128; }
  // The padded vocabulary of a model whose wte is split across `tp` tensor-parallel ranks: padded_vocab_size
  // itself for one rank, else rounded up to a multiple of 128 tp, so that each rank's slice is a multiple of
  // 128 rows (Megatron's rule). The extra rows are padding like the others: zero, never a target.
  int64_t padded_vocab_for(int tp) const;

  void validate() const;           // throws InvalidArgument on inconsistent values
  int64_t num_parameters() const;  // with the real (unpadded) vocabulary, as usually quoted
  std::string str() const;         // "12 layers, 12 heads, 768 wide, block 1024, vocab 50257 (padded 50304)"
  Json to_json() const;
  static GPT2Config from_json(const Json& j);
  bool operator==(const GPT2Config&) const = default;
};

}  // namespace lab
