#include "ch10_gpt2/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lab {

std::string sampled_text(const GPT2Tokenizer& tokenizer, int32_t id) {
  return id == GPT2Tokenizer::kEndOfText ? std::string("\n\n") : tokenizer.token_bytes(id);
}

std::vector<int32_t> sample_tokens(const GPT2& model, const std::vector<int32_t>& prompt, const SampleOptions& options,
                                   Rng& rng) {
  LAB_CHECK(!prompt.empty(), InvalidArgument, "sampling needs a non-empty prompt");
  const GPT2Config& c = model.config();
  std::vector<int32_t> context = prompt, generated;
  std::vector<float> probs(static_cast<size_t>(c.vocab_size));
  std::vector<int32_t> order(static_cast<size_t>(c.vocab_size));
  for (int64_t n = 0; n < options.max_new_tokens; ++n) {
    const size_t T = std::min(context.size(), static_cast<size_t>(c.block_size));
    const std::vector<int32_t> window(context.end() - static_cast<std::ptrdiff_t>(T), context.end());
    Tape tape(false);
    const Tensor tokens = Tensor::from_ints(window, {1, static_cast<int64_t>(T)}, model.device());
    const Tensor logits = model.logits(tape, tokens).value();
    const std::vector<float> last =
        logits.view(static_cast<int64_t>(T - 1) * c.padded_vocab_size, {c.vocab_size}).to_floats();
    // Softmax over the real vocabulary at the given temperature, restricted to the top k.
    std::iota(order.begin(), order.end(), 0);
    size_t keep = order.size();
    if (options.top_k > 0 && static_cast<size_t>(options.top_k) < keep) {
      keep = static_cast<size_t>(options.top_k);
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                        [&](int32_t a, int32_t b) { return last[a] > last[b]; });
    }
    float mx = -INFINITY;
    for (size_t i = 0; i < keep; ++i) mx = std::max(mx, last[order[i]]);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += probs[i] = std::exp((last[order[i]] - mx) / options.temperature);
    double u = rng.uniform() * sum;
    int32_t next = order[keep - 1];
    for (size_t i = 0; i < keep; ++i) {
      u -= probs[i];
      if (u < 0) {
        next = order[i];
        break;
      }
    }
    context.push_back(next);
    generated.push_back(next);
    if (options.on_token) options.on_token(next);
  }
  return generated;
}

}  // namespace lab
