// GPT-2 weights in safetensors with Hugging Face's names and layouts, for import and export.
//
// HF stores the four linear weights of a block with its Conv1D layout, [in, out]; the model computes with
// PyTorch Linear's [out, in], so import and export transpose them. The token embedding is stored with the
// real vocabulary ([50257, C]); the model's padded rows are zero on import and dropped on export.
//
// The stored tensors are always those of the whole model, whatever the layout that wrote or reads them: a
// model shard (tensor or pipeline parallelism) loads its slice of each tensor it holds, and a parallel run
// gathers whole tensors before it writes (chapter 8). Optimizer moments, laid out like the parameters, are
// stored the same way (ch10's checkpoints).
// Accepted on import: an optional "transformer." prefix on every name, f32 / bf16 / f16 values, and the
// extra tensors some exports carry (the causal-mask buffers "h.N.attn.bias", "lm_head.weight", which is
// tied to wte and therefore ignored).
#pragma once

#include <map>
#include <string>

#include "common/core/dtype.h"
#include "common/io/safetensors.h"
#include "common/nn/gpt2.h"

namespace lab {

// The configuration a weights file describes: layers counted from the names, widths from the shapes,
// heads from the "n_head" metadata or else GPT-2's head size of 64. Error(Format) naming the file otherwise.
GPT2Config read_gpt2_config(const std::string& path);

// Loads every parameter of `model` (this shard's slice of each) from the file; each missing tensor or wrong
// shape is Error(Format) naming the file, the tensor, and the expected and found shapes.
void load_gpt2_weights(GPT2& model, const std::string& path);

// How a file lays out a parameter's tensor: Hugging Face's (weights files: the Conv1D weights transposed to
// [in, out]) or the model's own ([out, in]: checkpoints' optimizer moments). wte holds the real vocabulary
// rows only, either way.
enum class StoredLayout { HuggingFace, Model };

// The same for any flat buffer laid out like the model's parameters (AdamW's moments): fills `flat` from the
// tensors named `prefix` + parameter name.
void load_gpt2_tensors(const SafetensorsReader& file, const GPT2& model, const Tensor& flat,
                       const std::string& prefix = "", StoredLayout layout = StoredLayout::HuggingFace);

// Writes the weights of a whole model (f32, or bf16 rounded to nearest-even) atomically, with the
// configuration in the metadata. InvalidArgument for a shard, whose ranks gather the whole tensors first and
// write them with write_gpt2_weights.
void save_gpt2_weights(const GPT2& model, const std::string& path, DType dtype = DType::F32,
                       const std::map<std::string, std::string>& extra_metadata = {});
// Writes whole-model parameters (the model's layout, Hugging Face names, any order) as a weights file.
void write_gpt2_weights(const GPT2Config& config, const std::vector<NamedTensor>& parameters, const std::string& path,
                        DType dtype = DType::F32, const std::map<std::string, std::string>& extra_metadata = {});

// A whole-model parameter tensor as a file stores it (see StoredLayout), on the CPU; and back into the model's
// layout with `shape` (wte padded with zero rows).
Tensor to_stored_layout(const GPT2Config& config, const std::string& name, const Tensor& whole,
                        StoredLayout layout = StoredLayout::HuggingFace);
Tensor from_stored_layout(const GPT2Config& config, const std::string& name, const Tensor& stored, const Shape& shape,
                          StoredLayout layout = StoredLayout::HuggingFace);

// "h.3.attn.c_attn.weight" and friends: true for the weights stored transposed in HF's Conv1D layout.
bool is_conv1d_weight(const std::string& name);

}  // namespace lab
