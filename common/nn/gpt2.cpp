#include "common/nn/gpt2.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "common/core/memory.h"
#include "common/ops/convert.h"
#include "common/util/rng.h"

namespace lab {

namespace {

std::string layer_name(int i, const char* rest) {
  return cat("h.", i, ".", rest);
}

// The whole model's parameters in the model's order (the order of declaration).
std::vector<GPT2Parameter> parameters_in_model_order(const GPT2Config& c, int64_t padded_vocab) {
  const int64_t C = c.n_embd;
  std::vector<GPT2Parameter> p;
  p.push_back({"wte.weight", {padded_vocab, C}, true});
  p.push_back({"wpe.weight", {c.block_size, C}, true});
  for (int i = 0; i < c.n_layer; ++i) {
    p.push_back({layer_name(i, "ln_1.weight"), {C}, false, i});
    p.push_back({layer_name(i, "ln_1.bias"), {C}, false, i});
    p.push_back({layer_name(i, "attn.c_attn.weight"), {3 * C, C}, true, i});
    p.push_back({layer_name(i, "attn.c_attn.bias"), {3 * C}, false, i});
    p.push_back({layer_name(i, "attn.c_proj.weight"), {C, C}, true, i});
    p.push_back({layer_name(i, "attn.c_proj.bias"), {C}, false, i});
    p.push_back({layer_name(i, "ln_2.weight"), {C}, false, i});
    p.push_back({layer_name(i, "ln_2.bias"), {C}, false, i});
    p.push_back({layer_name(i, "mlp.c_fc.weight"), {4 * C, C}, true, i});
    p.push_back({layer_name(i, "mlp.c_fc.bias"), {4 * C}, false, i});
    p.push_back({layer_name(i, "mlp.c_proj.weight"), {C, 4 * C}, true, i});
    p.push_back({layer_name(i, "mlp.c_proj.bias"), {C}, false, i});
  }
  p.push_back({"ln_f.weight", {C}, false});
  p.push_back({"ln_f.bias", {C}, false});
  return p;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// Draws the initial values of the whole-model parameter `p` (canonical index `index`) into `dst`.
// Values are drawn in chunks of fixed size, each chunk from its own generator seeded by (seed, parameter
// index, chunk index): parallel, yet identical whatever the thread count.
void draw_initial_values(const GPT2Config& config, const GPT2Parameter& p, uint64_t index, uint64_t seed, float* dst) {
  constexpr int64_t kChunk = 1 << 16;
  int64_t n = shape_numel(p.shape);
  std::fill(dst, dst + n, 0.0f);
  if (p.name == "wte.weight") n = int64_t{config.vocab_size} * config.n_embd;  // padded rows stay zero
  if (p.shape.size() == 1) {  // LayerNorm gains are 1; every bias and LayerNorm shift is 0
    if (ends_with(p.name, "ln_1.weight") || ends_with(p.name, "ln_2.weight") || p.name == "ln_f.weight")
      std::fill(dst, dst + n, 1.0f);
    return;
  }
  const float std =
      ends_with(p.name, "c_proj.weight") ? 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer)) : 0.02f;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    Rng rng(seed * 0x9e3779b97f4a7c15ull + index * 0x100000001b3ull + static_cast<uint64_t>(c));
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) dst[i] = rng.normal(0.0f, std);
  }
}

}  // namespace

std::vector<GPT2Parameter> gpt2_parameters(const GPT2Config& config, int64_t padded_vocab) {
  std::vector<GPT2Parameter> p = parameters_in_model_order(config, padded_vocab);
  std::stable_partition(p.begin(), p.end(), [](const GPT2Parameter& x) { return x.decay; });
  return p;
}

bool shard_holds(const ModelShard& shard, const GPT2Config& config, const GPT2Parameter& p) {
  if (p.block >= 0) return shard.holds_block(config, p.block);
  if (p.name == "wte.weight") return shard.has_embedding || shard.has_head;  // the LM head is tied to it
  if (p.name == "wpe.weight") return shard.has_embedding;
  return shard.has_head;  // ln_f
}

GPT2::GPT2(const GPT2Config& config, Device device, ModelOptions options, const ModelShard& shard)
    : config_(config), shard_(shard), options_(std::move(options)) {
  config_.validate();
  shard_.validate(config_);
  const int tp = shard_.tp_size;
  if (tp > 1 || options_.tensor_parallel) {
    const TensorParallelFunctions* functions = options_.tensor_parallel.get();
    LAB_CHECK(functions && functions->tp_size() == tp && functions->tp_rank() == shard_.tp_rank, InvalidArgument,
              "a tensor-parallel shard (", shard_.str(config_),
              ") needs options.tensor_parallel over its tp group of that size and rank");
    LAB_CHECK(!options_.mlp, InvalidArgument,
              "a tensor-parallel shard runs Megatron's MLP (options.mlp cannot be used with tensor parallelism)");
  }
  padded_vocab_ = config_.padded_vocab_for(tp);
  for (const GPT2Parameter& p : parameters_in_model_order(config_, padded_vocab_))
    if (shard_holds(shard_, config_, p))
      params_.declare(p.name, tp_shard_shape(p.shape, tp_split_of(p.name), tp), p.decay);
  for (const GPT2Parameter& p : gpt2_parameters(config_, padded_vocab_))
    if (shard_holds(shard_, config_, p)) held_.push_back(p);
  params_.allocate(device);

  if (shard_.has_embedding || shard_.has_head) wte_ = params_.var("wte.weight");
  if (shard_.has_embedding) wpe_ = params_.var("wpe.weight");
  auto linear = [&](int i, const char* name) {
    return Linear{params_.var(layer_name(i, cat(name, ".weight").c_str())),
                  params_.var(layer_name(i, cat(name, ".bias").c_str())), Tensor(), Tensor()};
  };
  auto layernorm = [&](const std::string& prefix) {
    return LayerNorm{params_.var(prefix + ".weight"), params_.var(prefix + ".bias")};
  };
  for (int i = shard_.first_block; i < shard_.block_end(config_); ++i) {
    Block b;
    b.ln_1 = layernorm(cat("h.", i, ".ln_1"));
    b.attn = {linear(i, "attn.c_attn"), linear(i, "attn.c_proj"), config_.n_head / tp};
    b.ln_2 = layernorm(cat("h.", i, ".ln_2"));
    b.mlp = {linear(i, "mlp.c_fc"), linear(i, "mlp.c_proj")};
    blocks_.push_back(std::move(b));
  }
  if (shard_.has_head) ln_f_ = layernorm("ln_f");
}

void GPT2::init_weights(uint64_t seed) {
  const std::vector<GPT2Parameter> canonical = gpt2_parameters(config_, padded_vocab_);
  // A CPU model's values are drawn straight into its parameter buffer (zero-filled, so the padded rows stay
  // zero); a GPU's through one host buffer. A host copy of every parameter on the CPU would be the process's
  // peak resident memory: params, grads and AdamW's moments are already allocated when the trainer initialises.
  std::vector<float> host;
  if (!device().is_cpu()) host.assign(static_cast<size_t>(params_.numel()), 0.0f);
  float* const base = device().is_cpu() ? params_.params().data<float>() : host.data();
  std::vector<float> whole;
  for (size_t index = 0; index < canonical.size(); ++index) {
    const GPT2Parameter& p = canonical[index];
    if (!shard_holds(shard_, config_, p)) continue;
    float* dst = base + params_.info(p.name).offset;
    const TpSplit split = tp_split_of(p.name);
    if (shard_.tp_size == 1 || split == TpSplit::Replicated) {
      draw_initial_values(config_, p, index, seed, dst);
      continue;
    }
    // A slice of a tensor-parallel parameter: draw the whole tensor, keep this rank's part.
    whole.resize(static_cast<size_t>(shape_numel(p.shape)));
    draw_initial_values(config_, p, index, seed, whole.data());
    const Tensor part = tp_slice(Tensor::wrap(whole.data(), p.shape, DType::F32, Device::cpu(), [] {}), split,
                                 shard_.tp_rank, shard_.tp_size);
    std::copy_n(part.data<float>(), part.numel(), dst);
  }
  if (!device().is_cpu())
    params_.params().copy_from(Tensor::wrap(host.data(), {params_.numel()}, DType::F32, Device::cpu(), [] {}));
}

void GPT2::set_matmul_dtype(DType dtype) {
  LAB_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16, InvalidArgument,
            "matmul dtype must be f32, bf16 or f16, got ", dtype_name(dtype));
  matmul_dtype_ = dtype;
  params_16bit_ = Tensor();
  if (dtype != DType::F32) {
    MemoryScope scope(MemCategory::Params);
    params_16bit_ = Tensor::empty({params_.numel()}, dtype, device());
  }
  // Each matmul weight's and bias's 16-bit view (undefined for fp32).
  const auto copy_of = [&](const std::string& name) {
    if (dtype == DType::F32) return Tensor();
    const ParamInfo& p = params_.info(name);
    return params_16bit_.view(p.offset, p.shape);
  };
  for (size_t k = 0; k < blocks_.size(); ++k) {
    const int i = shard_.first_block + static_cast<int>(k);
    Block& b = blocks_[k];
    for (const auto& [linear, name] : {std::pair<Linear*, const char*>{&b.attn.c_attn, "attn.c_attn"},
                                       {&b.attn.c_proj, "attn.c_proj"},
                                       {&b.mlp.c_fc, "mlp.c_fc"},
                                       {&b.mlp.c_proj, "mlp.c_proj"}}) {
      linear->weight_16bit = copy_of(layer_name(i, cat(name, ".weight").c_str()));
      linear->bias_16bit = copy_of(layer_name(i, cat(name, ".bias").c_str()));
    }
  }
  wte_16bit_ = shard_.has_head ? copy_of("wte.weight") : Tensor();
  refresh_matmul_weights();
}

void GPT2::refresh_matmul_weights() {
  if (params_16bit_.defined()) ops::convert(params_16bit_, params_.params());
}

void GPT2::check_holds(bool part, const char* what) const {
  LAB_CHECK(part, InvalidArgument, "this model shard (", shard_.str(config_), ") does not hold ", what);
}

Var GPT2::embed(Tape& tape, const Tensor& tokens) const {
  check_holds(shard_.has_embedding, "the embeddings");
  tokens.check_ndim(2, "GPT-2 input tokens");
  LAB_CHECK(tokens.dim(1) <= config_.block_size, InvalidArgument, "sequence length ", tokens.dim(1),
            " exceeds the model's block size ", config_.block_size);
  LAB_CHECK(options_.activations == DType::F32 || options_.activations == matmul_dtype_, InvalidArgument, "GPT-2 with ",
            dtype_name(options_.activations), " activations needs ", dtype_name(options_.activations),
            " matmuls (set_matmul_dtype), not ", dtype_name(matmul_dtype_));
  const auto compute = [&] {
    if (!options_.tensor_parallel && !options_.embedding)
      return ag::embedding(tape, tokens, wte_, wpe_, options_.activations);
    const Var x = options_.tensor_parallel
                      ? options_.tensor_parallel->vocab_parallel_embedding(tape, tokens, wte_, wpe_, vocab_start())
                      : options_.embedding(tape, tokens, wte_, wpe_);
    return ag::cast(tape, x, options_.activations);
  };
  return options_.root ? options_.root(tape, ModelOptions::RootPart::Embedding, compute) : compute();
}

Var GPT2::forward_blocks(Tape& tape, const Var& input) const {
  Var x = input;
  for (const Block& b : blocks_)
    x = options_.block ? options_.block(tape, b, x, options_) : block_forward(tape, b, x, options_);
  return x;
}

Var GPT2::head_logits(Tape& tape, const Var& x) const {
  check_holds(shard_.has_head, "the LM head");
  const auto compute = [&] {
    const Var h = ln_f_.forward(tape, x);
    if (options_.lm_head && !options_.tensor_parallel && !wte_16bit_.defined()) return options_.lm_head(tape, h, wte_);
    // The LM head is column-parallel over the vocabulary: f(h) @ wte_slice^T gives this rank's logits.
    const Linear head{wte_, Var(), wte_16bit_, Tensor()};
    return head.forward(tape, options_.tensor_parallel ? options_.tensor_parallel->copy_to_tp_ranks(tape, h) : h);
  };
  return options_.root ? options_.root(tape, ModelOptions::RootPart::Head, compute) : compute();
}

Tensor GPT2::head_loss(Tape& tape, const Var& x, const Tensor& targets, const ops::GradScale& grad_scale) const {
  if (options_.head_loss) {
    check_holds(shard_.has_head, "the LM head");
    // The hook makes wte's gradient whole in the forward pass; the hooks of ZeRO stages 2 and 3 (chapter 7) would
    // reduce it, or gather wte, around a head they compute themselves.
    LAB_CHECK(!options_.tensor_parallel && !options_.lm_head && !options_.root, InvalidArgument,
              "a head_loss hook (--lm-head chunked) runs on one tensor-parallel rank, without ZeRO stage 2 or 3's "
              "head and root hooks");
    const Linear head{wte_, Var(), wte_16bit_, Tensor()};
    return options_.head_loss(tape, ln_f_.forward(tape, x), head, targets, config_.vocab_size, grad_scale, options_);
  }
  const Var logits = head_logits(tape, x);
  if (options_.tensor_parallel)
    return options_.tensor_parallel->vocab_parallel_cross_entropy(tape, logits, targets, vocab_start(),
                                                                  config_.vocab_size, grad_scale);
  return ag::cross_entropy_through(options_.classifier, tape, logits, targets, config_.vocab_size, grad_scale);
}

Var GPT2::hidden(Tape& tape, const Tensor& tokens) const {
  check_holds(shard_.has_head, "the final LayerNorm");
  const Var x = forward_blocks(tape, embed(tape, tokens));
  const auto compute = [&] { return ln_f_.forward(tape, x); };
  return options_.root ? options_.root(tape, ModelOptions::RootPart::Head, compute) : compute();
}

Var GPT2::logits(Tape& tape, const Tensor& tokens) const {
  return head_logits(tape, forward_blocks(tape, embed(tape, tokens)));
}

Tensor GPT2::loss(Tape& tape, const Tensor& tokens, const Tensor& targets, const ops::GradScale& grad_scale) const {
  LAB_CHECK(targets.shape() == tokens.shape(), InvalidArgument, "targets ", shape_str(targets.shape()),
            " do not match tokens ", shape_str(tokens.shape()));
  return head_loss(tape, forward_blocks(tape, embed(tape, tokens)), targets, grad_scale);
}

double gpt2_flops_per_token(const GPT2Config& c, int64_t seq_len) {
  const double C = c.n_embd, L = c.n_layer;
  const double matmul_params = L * 12.0 * C * C + static_cast<double>(c.padded_vocab_size) * C;
  return 6.0 * matmul_params + 12.0 * L * C * static_cast<double>(seq_len);
}

}  // namespace lab
