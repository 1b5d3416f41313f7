// Gathering the whole tensors of a split model (see whole_tensors.h).
#include "ch08_distributed/tp/whole_tensors.h"

namespace lab::ch08::tp {

namespace {

constexpr int kWholeTensorTag = 3;

// The first pipeline stage whose shard holds `p`.
int owning_stage(const GPT2Config& config, const GPT2Parameter& p, const comm::ParallelLayout& layout) {
  for (int s = 0; s < layout.pp; ++s)
    if (shard_holds(ModelShard::of_rank(config, 0, layout.tp, s, layout.pp), config, p)) return s;
  fail(ErrorKind::Internal, "no pipeline stage holds ", p.name);
}

// This rank's slices of `p` joined over the tp group, on the CPU (every tp rank gets it).
Tensor join_over_tp(const GPT2& model, const Tensor& flat, const GPT2Parameter& p, comm::Communicator& tp_group) {
  const ParamInfo& info = model.parameters().info(p.name);
  const Tensor local = flat.view(info.offset, info.shape);
  const TpSplit split = tp_split_of(p.name);
  if (tp_group.size() == 1 || split == TpSplit::Replicated) return local.to(Device::cpu());
  const Tensor parts = Tensor::empty({tp_group.size() * info.numel()}, DType::F32, flat.device());
  tp_group.all_gather(local.flatten(), parts);
  return tp_join(parts.to(Device::cpu()), split, p.shape, tp_group.size());
}

}  // namespace

std::vector<NamedTensor> gather_whole_tensors(const GPT2& model, const Tensor& flat,
                                              const comm::ParallelContext& context) {
  LAB_CHECK(flat.numel() == model.parameters().numel() && flat.dtype() == DType::F32, InvalidArgument,
            "gather_whole_tensors: the buffer is not laid out like the parameters");
  std::vector<NamedTensor> out;
  const comm::ParallelCoords& c = context.coords();
  if (c.dp != 0) return out;
  const GPT2Config& config = model.config();
  for (const GPT2Parameter& p : gpt2_parameters(config, model.padded_vocab())) {
    const int owner = owning_stage(config, p, context.layout());
    if (c.pp == owner) {
      Tensor whole = join_over_tp(model, flat, p, context.tp());
      if (owner == 0) {
        if (c.tp == 0) out.push_back({p.name, whole});
      } else if (c.tp == 0) {
        context.pp().send(whole.to(flat.device()), 0, kWholeTensorTag);
      }
    } else if (c.pp == 0 && c.tp == 0) {
      const Tensor whole = Tensor::empty(p.shape, DType::F32, flat.device());
      context.pp().recv(whole, owner, kWholeTensorTag);
      out.push_back({p.name, whole.to(Device::cpu())});
    }
  }
  return out;
}

std::unique_ptr<GPT2> gather_whole_model(const GPT2& model, const comm::ParallelContext& context, Device device) {
  const std::vector<NamedTensor> whole = gather_whole_tensors(model, model.parameters().params(), context);
  if (context.world().rank() != 0) return nullptr;
  auto out = std::make_unique<GPT2>(model.config(), device);
  for (const NamedTensor& t : whole) {
    const Tensor dst = out->parameters().value(t.name);
    // wte has the padded rows of the layout's table; the whole model's table may have fewer, all padding too.
    dst.copy_from(t.name == "wte.weight" ? t.tensor.slice_rows(0, dst.dim(0)) : t.tensor);
  }
  return out;
}

}  // namespace lab::ch08::tp
