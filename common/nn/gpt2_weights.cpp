#include "common/nn/gpt2_weights.h"

#include <set>

#include "common/io/safetensors.h"

namespace lab {

namespace {

constexpr const char* kPrefix = "transformer.";

// [rows, cols] -> [cols, rows] on the host.
Tensor transpose_2d(const Tensor& t) {
  const int64_t R = t.dim(0), C = t.dim(1);
  const std::vector<float> in = t.to_floats();
  std::vector<float> out(in.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) out[c * R + r] = in[r * C + c];
  return Tensor::from_floats(out, {C, R});
}

// The name under which `name` is stored in the file: plain or with the "transformer." prefix.
std::string stored_name(const SafetensorsReader& file, const std::string& name) {
  if (file.contains(name)) return name;
  if (file.contains(kPrefix + name)) return kPrefix + name;
  fail(ErrorKind::Format, file.path(), ": missing tensor '", name, "'");
}

Shape stored_shape(const GPT2Config& c, const GPT2Parameter& p, StoredLayout layout) {
  if (p.name == "wte.weight") return {c.vocab_size, c.n_embd};
  if (layout == StoredLayout::HuggingFace && is_conv1d_weight(p.name)) return {p.shape[1], p.shape[0]};
  return p.shape;
}

// The layer index of "h.<i>.<rest>" (with or without the "transformer." prefix), or -1 for other names;
// `rest` receives what follows the index.
int layer_index(std::string_view name, std::string_view* rest = nullptr) {
  if (name.starts_with(kPrefix)) name.remove_prefix(std::string_view(kPrefix).size());
  if (!name.starts_with("h.")) return -1;
  name.remove_prefix(2);
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 6) return -1;
  int index = 0;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return -1;
    index = index * 10 + (c - '0');
  }
  if (rest) *rest = name.substr(dot + 1);
  return index;
}

}  // namespace

bool is_conv1d_weight(const std::string& name) {
  std::string_view rest;
  if (layer_index(name, &rest) < 0) return false;
  return rest == "attn.c_attn.weight" || rest == "attn.c_proj.weight" || rest == "mlp.c_fc.weight" ||
         rest == "mlp.c_proj.weight";
}

GPT2Config read_gpt2_config(const std::string& path) {
  const SafetensorsReader file(path);
  GPT2Config c;
  const Shape& wte = file.shape(stored_name(file, "wte.weight"));
  const Shape& wpe = file.shape(stored_name(file, "wpe.weight"));
  LAB_CHECK(wte.size() == 2 && wpe.size() == 2 && wte[1] == wpe[1], Format, path, ": wte.weight ", shape_str(wte),
            " and wpe.weight ", shape_str(wpe), " are not [vocab, C] and [T, C]");
  c.vocab_size = static_cast<int>(wte[0]);
  c.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(c.vocab_size));
  c.n_embd = static_cast<int>(wte[1]);
  c.block_size = static_cast<int>(wpe[0]);
  std::set<int> layers;
  for (const std::string& name : file.names())
    if (const int i = layer_index(name); i >= 0) layers.insert(i);
  LAB_CHECK(!layers.empty() && *layers.rbegin() + 1 == static_cast<int>(layers.size()), Format, path,
            ": transformer layers h.0 ... h.N are missing or not numbered contiguously");
  c.n_layer = static_cast<int>(layers.size());
  const auto it = file.metadata().find("n_head");
  if (it != file.metadata().end()) {
    c.n_head = std::stoi(it->second);
  } else {
    LAB_CHECK(c.n_embd % 64 == 0, Format, path, ": no n_head in the metadata and width ", c.n_embd,
              " is not a multiple of GPT-2's head size 64");
    c.n_head = c.n_embd / 64;
  }
  c.validate();
  return c;
}

Tensor to_stored_layout(const GPT2Config& config, const std::string& name, const Tensor& whole, StoredLayout layout) {
  Tensor t = whole.to(Device::cpu());
  if (name == "wte.weight") return t.slice_rows(0, config.vocab_size);
  if (layout == StoredLayout::HuggingFace && is_conv1d_weight(name)) return transpose_2d(t);
  return t;
}

Tensor from_stored_layout(const GPT2Config& config, const std::string& name, const Tensor& stored, const Shape& shape,
                          StoredLayout layout) {
  const Tensor f32 = stored.dtype() == DType::F32 ? stored : stored.to_dtype(DType::F32);
  if (layout == StoredLayout::HuggingFace && is_conv1d_weight(name)) return transpose_2d(f32);
  if (name != "wte.weight") return f32;
  Tensor padded = Tensor::zeros(shape, DType::F32);
  padded.slice_rows(0, config.vocab_size).copy_from(f32);
  return padded;
}

void load_gpt2_tensors(const SafetensorsReader& file, const GPT2& model, const Tensor& flat, const std::string& prefix,
                       StoredLayout layout) {
  const GPT2Config& c = model.config();
  const ModelShard& shard = model.shard();
  const ParameterStore& params = model.parameters();
  LAB_CHECK(flat.numel() == params.numel(), InvalidArgument, "load_gpt2_tensors: a buffer of ", flat.numel(),
            " elements is not laid out like the ", params.numel(), " of the parameters");
  for (const GPT2Parameter& p : model.held_parameters()) {
    const std::string name = stored_name(file, prefix + p.name);
    const Shape expected = stored_shape(c, p, layout);
    LAB_CHECK(file.shape(name) == expected, Format, file.path(), ": tensor '", name, "' has shape ",
              shape_str(file.shape(name)), ", expected ", shape_str(expected), " for ", c.str());
    const DType stored_dtype = file.dtype(name);
    LAB_CHECK(stored_dtype == DType::F32 || stored_dtype == DType::BF16 || stored_dtype == DType::F16, Format,
              file.path(), ": tensor '", name, "' is ", dtype_name(stored_dtype), ", not a floating-point tensor");
    const ParamInfo& info = params.info(p.name);
    const Tensor dst = flat.view(info.offset, info.shape);
    const Tensor whole = from_stored_layout(c, p.name, file.load(name), p.shape, layout);
    dst.copy_from(shard.tp_size == 1 ? whole : tp_slice(whole, tp_split_of(p.name), shard.tp_rank, shard.tp_size));
  }
}

void load_gpt2_weights(GPT2& model, const std::string& path) {
  load_gpt2_tensors(SafetensorsReader(path), model, model.parameters().params());
}

void save_gpt2_weights(const GPT2& model, const std::string& path, DType dtype,
                       const std::map<std::string, std::string>& extra_metadata) {
  LAB_CHECK(model.shard().whole(model.config()), InvalidArgument, "save_gpt2_weights: the model is a shard (",
            model.shard().str(model.config()), "); gather the whole tensors and write them with write_gpt2_weights");
  std::vector<NamedTensor> tensors;
  for (const ParamInfo& p : model.parameters().infos()) tensors.push_back({p.name, model.parameters().value(p.name)});
  write_gpt2_weights(model.config(), tensors, path, dtype, extra_metadata);
}

void write_gpt2_weights(const GPT2Config& config, const std::vector<NamedTensor>& parameters, const std::string& path,
                        DType dtype, const std::map<std::string, std::string>& extra_metadata) {
  LAB_CHECK(dtype == DType::F32 || dtype == DType::BF16, InvalidArgument, "weights can be saved as f32 or bf16, not ",
            dtype_name(dtype));
  std::vector<NamedTensor> tensors;
  for (const NamedTensor& p : parameters) {
    const Tensor t = to_stored_layout(config, p.name, p.tensor);
    tensors.push_back({p.name, dtype == DType::F32 ? t : t.to_dtype(dtype)});
  }
  std::map<std::string, std::string> metadata = extra_metadata;
  metadata["format"] = "pt";
  metadata["n_head"] = std::to_string(config.n_head);
  metadata["n_layer"] = std::to_string(config.n_layer);
  write_safetensors(path, tensors, metadata);
}

}  // namespace lab
