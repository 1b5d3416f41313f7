#include "common/nn/config.h"

#include "common/core/error.h"

namespace lab {

namespace {
struct Named {
  const char* name;
  int n_layer, n_head, n_embd, block_size;
};
constexpr Named kConfigs[] = {
    {"d12", 12, 12, 768, 1024},  {"d24", 24, 16, 1024, 1024}, {"d36", 36, 20, 1280, 1024},
    {"d48", 48, 25, 1600, 1024}, {"small", 4, 4, 128, 256},   {"tiny", 2, 2, 64, 64},
};
}  // namespace

GPT2Config GPT2Config::from_name(const std::string& name) {
  for (const Named& c : kConfigs) {
    if (name != c.name) continue;
    GPT2Config cfg;
    cfg.n_layer = c.n_layer;
    cfg.n_head = c.n_head;
    cfg.n_embd = c.n_embd;
    cfg.block_size = c.block_size;
    return cfg;
  }
  std::string list;
  for (const Named& c : kConfigs) list += (list.empty() ? "" : ", ") + std::string(c.name);
  fail(ErrorKind::InvalidArgument, "unknown model '", name, "' (expected one of ", list, ")");
}

std::vector<std::string> GPT2Config::names() {
  std::vector<std::string> out;
  for (const Named& c : kConfigs) out.emplace_back(c.name);
  return out;
}

void GPT2Config::validate() const {
  LAB_CHECK(n_layer > 0 && n_head > 0 && n_embd > 0 && block_size > 0 && vocab_size > 0, InvalidArgument,
            "model config: every size must be positive (", str(), ")");
  LAB_CHECK(n_embd % n_head == 0, InvalidArgument, "model config: width ", n_embd, " is not divisible by ", n_head,
            " heads");
  LAB_CHECK(padded_vocab_size >= vocab_size, InvalidArgument, "model config: padded vocabulary ", padded_vocab_size,
            " is smaller than the vocabulary ", vocab_size);
}

int64_t GPT2Config::padded_vocab_for(int tp) const {
  LAB_CHECK(tp >= 1, InvalidArgument, "tensor-parallel size ", tp, " is not positive");
  if (tp == 1) return padded_vocab_size;
  const int64_t multiple = int64_t{128} * tp;
  return (padded_vocab_size + multiple - 1) / multiple * multiple;
}

int64_t GPT2Config::num_parameters() const {
  const int64_t C = n_embd, L = n_layer;
  const int64_t per_layer = 2 * C /*ln_1*/ + 3 * C * C + 3 * C /*c_attn*/ + C * C + C /*attn.c_proj*/ + 2 * C /*ln_2*/ +
                            4 * C * C + 4 * C /*c_fc*/ + 4 * C * C + C /*mlp.c_proj*/;
  return int64_t{vocab_size} * C + int64_t{block_size} * C + L * per_layer + 2 * C /*ln_f*/;
}

std::string GPT2Config::str() const {
  return cat(n_layer, " layers, ", n_head, " heads, ", n_embd, " wide, block ", block_size, ", vocab ", vocab_size,
             " (padded ", padded_vocab_size, ")");
}

Json GPT2Config::to_json() const {
  Json j = Json::object();
  j.set("n_layer", n_layer);
  j.set("n_head", n_head);
  j.set("n_embd", n_embd);
  j.set("block_size", block_size);
  j.set("vocab_size", vocab_size);
  j.set("padded_vocab_size", padded_vocab_size);
  return j;
}

GPT2Config GPT2Config::from_json(const Json& j) {
  GPT2Config c;
  c.n_layer = static_cast<int>(j.at("n_layer").as_int());
  c.n_head = static_cast<int>(j.at("n_head").as_int());
  c.n_embd = static_cast<int>(j.at("n_embd").as_int());
  c.block_size = static_cast<int>(j.at("block_size").as_int());
  c.vocab_size = static_cast<int>(j.at("vocab_size").as_int());
  c.padded_vocab_size = static_cast<int>(j.at("padded_vocab_size").as_int());
  c.validate();
  return c;
}

}  // namespace lab
