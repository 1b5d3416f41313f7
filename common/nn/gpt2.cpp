#include "common/nn/gpt2.h"

#include <cmath>

#include "common/util/rng.h"

namespace lab {

namespace {

std::string layer_name(int i, const char* rest) {
  return cat("h.", i, ".", rest);
}

void declare_parameters(ParameterStore& p, const GPT2Config& c) {
  const int64_t C = c.n_embd;
  p.declare("wte.weight", {c.padded_vocab_size, C}, true);
  p.declare("wpe.weight", {c.block_size, C}, true);
  for (int i = 0; i < c.n_layer; ++i) {
    p.declare(layer_name(i, "ln_1.weight"), {C}, false);
    p.declare(layer_name(i, "ln_1.bias"), {C}, false);
    p.declare(layer_name(i, "attn.c_attn.weight"), {3 * C, C}, true);
    p.declare(layer_name(i, "attn.c_attn.bias"), {3 * C}, false);
    p.declare(layer_name(i, "attn.c_proj.weight"), {C, C}, true);
    p.declare(layer_name(i, "attn.c_proj.bias"), {C}, false);
    p.declare(layer_name(i, "ln_2.weight"), {C}, false);
    p.declare(layer_name(i, "ln_2.bias"), {C}, false);
    p.declare(layer_name(i, "mlp.c_fc.weight"), {4 * C, C}, true);
    p.declare(layer_name(i, "mlp.c_fc.bias"), {4 * C}, false);
    p.declare(layer_name(i, "mlp.c_proj.weight"), {C, 4 * C}, true);
    p.declare(layer_name(i, "mlp.c_proj.bias"), {C}, false);
  }
  p.declare("ln_f.weight", {C}, false);
  p.declare("ln_f.bias", {C}, false);
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

}  // namespace

GPT2::GPT2(const GPT2Config& config, Device device, ModelOptions options)
    : config_(config), options_(std::move(options)) {
  config_.validate();
  declare_parameters(params_, config_);
  params_.allocate(device);
  wte_ = params_.var("wte.weight");
  wpe_ = params_.var("wpe.weight");
  auto linear = [&](int i, const char* name) {
    return Linear{params_.var(layer_name(i, cat(name, ".weight").c_str())),
                  params_.var(layer_name(i, cat(name, ".bias").c_str()))};
  };
  auto layernorm = [&](const std::string& prefix) {
    return LayerNorm{params_.var(prefix + ".weight"), params_.var(prefix + ".bias")};
  };
  for (int i = 0; i < config_.n_layer; ++i) {
    Block b;
    b.ln_1 = layernorm(cat("h.", i, ".ln_1"));
    b.attn = {linear(i, "attn.c_attn"), linear(i, "attn.c_proj"), config_.n_head};
    b.ln_2 = layernorm(cat("h.", i, ".ln_2"));
    b.mlp = {linear(i, "mlp.c_fc"), linear(i, "mlp.c_proj")};
    blocks_.push_back(std::move(b));
  }
  ln_f_ = layernorm("ln_f");
}

void GPT2::init_weights(uint64_t seed) {
  // Values are drawn on the host in chunks of fixed size, each chunk from its own generator seeded by
  // (seed, parameter index, chunk index): parallel, yet identical whatever the thread count.
  constexpr int64_t kChunk = 1 << 16;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  const auto& infos = params_.infos();
  std::vector<float> host(static_cast<size_t>(params_.numel()), 0.0f);
  for (size_t pi = 0; pi < infos.size(); ++pi) {
    const ParamInfo& p = infos[pi];
    float* dst = host.data() + p.offset;
    int64_t n = p.numel();
    if (p.name == "wte.weight") n = int64_t{config_.vocab_size} * config_.n_embd;  // padded rows stay zero
    if (p.shape.size() == 1) {  // LayerNorm gains are 1; every bias and LayerNorm shift is 0
      if (ends_with(p.name, "ln_1.weight") || ends_with(p.name, "ln_2.weight") || p.name == "ln_f.weight")
        std::fill(dst, dst + n, 1.0f);
      continue;
    }
    const float std = ends_with(p.name, "c_proj.weight") ? proj_std : 0.02f;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      Rng rng(seed * 0x9e3779b97f4a7c15ull + pi * 0x100000001b3ull + static_cast<uint64_t>(c));
      const int64_t end = std::min(n, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < end; ++i) dst[i] = rng.normal(0.0f, std);
    }
  }
  params_.params().copy_from(Tensor::wrap(host.data(), {params_.numel()}, DType::F32, Device::cpu(), [] {}));
}

Var GPT2::hidden(Tape& tape, const Tensor& tokens) const {
  tokens.check_ndim(2, "GPT-2 input tokens");
  LAB_CHECK(tokens.dim(1) <= config_.block_size, InvalidArgument, "sequence length ", tokens.dim(1),
            " exceeds the model's block size ", config_.block_size);
  Var x = ag::embedding(tape, tokens, wte_, wpe_);
  for (const Block& b : blocks_)
    x = options_.block ? options_.block(tape, b, x, options_) : block_forward(tape, b, x, options_);
  return ln_f_.forward(tape, x);
}

Var GPT2::logits(Tape& tape, const Tensor& tokens) const {
  return ag::linear(tape, hidden(tape, tokens), wte_, Var());
}

Tensor GPT2::loss(Tape& tape, const Tensor& tokens, const Tensor& targets, float grad_scale) const {
  LAB_CHECK(targets.shape() == tokens.shape(), InvalidArgument, "targets ", shape_str(targets.shape()),
            " do not match tokens ", shape_str(tokens.shape()));
  return ag::cross_entropy(tape, logits(tape, tokens), targets, config_.vocab_size, grad_scale);
}

double gpt2_flops_per_token(const GPT2Config& c, int64_t seq_len) {
  const double C = c.n_embd, L = c.n_layer;
  const double matmul_params = L * 12.0 * C * C + static_cast<double>(c.padded_vocab_size) * C;
  return 6.0 * matmul_params + 12.0 * L * C * static_cast<double>(seq_len);
}

}  // namespace lab
