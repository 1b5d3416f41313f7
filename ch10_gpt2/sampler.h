// Text generation from a GPT-2: temperature and top-k sampling, one token at a time.
//
// Each new token re-runs the forward pass over the (block-size cropped) context: no key/value cache,
// which keeps the model code untouched and is fast enough for the short samples the trainer prints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/nn/gpt2.h"
#include "common/text/tokenizer.h"
#include "common/util/rng.h"

namespace lab {

struct SampleOptions {
  int64_t max_new_tokens = 64;
  float temperature = 1.0f;
  int top_k = 40;  // 0: the whole vocabulary
  // Called with each new token as soon as it is drawn (to stream the text); may be empty.
  std::function<void(int32_t)> on_token;
};

// Continues `prompt` (token ids; must not be empty) and returns only the new tokens.
std::vector<int32_t> sample_tokens(const GPT2& model, const std::vector<int32_t>& prompt, const SampleOptions& options,
                                   Rng& rng);

// A sampled token as text: its bytes, or a paragraph break for end-of-text (which separates documents: the
// sample goes on with a new one).
std::string sampled_text(const GPT2Tokenizer& tokenizer, int32_t id);

}  // namespace lab
