// The flat buffers, their two layouts and the views into them (see parameters.h).
#include "common/nn/parameters.h"

#include <algorithm>

namespace lab {

namespace {

constexpr int64_t kAlign = 32;
int64_t align_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

std::vector<ParamInfo> lay_out(std::vector<ParamInfo> declared, ParameterOrder order, int64_t& total) {
  // The order in which parameters take their places in the buffer, as indices into `declared`.
  std::vector<size_t> placement(declared.size());
  for (size_t i = 0; i < placement.size(); ++i) placement[i] = i;
  if (order == ParameterOrder::Backward)
    std::reverse(placement.begin(), placement.end());
  else
    std::stable_partition(placement.begin(), placement.end(), [&](size_t i) { return declared[i].decay; });
  int64_t offset = 0;
  for (const size_t i : placement) {
    declared[i].offset = offset;
    offset = align_up(offset + declared[i].numel());
  }
  total = offset;
  return declared;
}

void ParameterStore::declare(const std::string& name, const Shape& shape, bool decay) {
  LAB_CHECK(!allocated(), InvalidArgument, "declare('", name, "') after the parameters were allocated");
  LAB_CHECK(find(name) == nullptr, InvalidArgument, "parameter '", name, "' declared twice");
  infos_.push_back({name, shape, 0, decay});
}

void ParameterStore::allocate(Device device, ParameterOrder order) {
  LAB_CHECK(!allocated(), InvalidArgument, "parameters allocated twice");
  order_ = order;
  device_ = device;
  allocated_ = true;
  infos_ = lay_out(std::move(infos_), order, total_);
  {
    MemoryScope scope(MemCategory::Params);
    params_ = Tensor::zeros({total_}, DType::F32, device);
  }
  {
    MemoryScope scope(MemCategory::Grads);
    grads_ = Tensor::zeros({total_}, DType::F32, device);
  }
  for (const ParamInfo& p : infos_)
    vars_.push_back(Var::parameter(params_.view(p.offset, p.shape), grads_.view(p.offset, p.shape)));

  std::vector<ElementRange> decayed;
  for (const ParamInfo& p : infos_)
    if (p.decay) decayed.push_back({p.offset, p.offset + p.numel()});
  std::sort(decayed.begin(), decayed.end(),
            [](const ElementRange& a, const ElementRange& b) { return a.begin < b.begin; });
  for (const ElementRange& r : decayed) {
    if (!decay_ranges_.empty() && align_up(decay_ranges_.back().end) == r.begin)
      decay_ranges_.back().end = r.end;
    else
      decay_ranges_.push_back(r);
  }
}

const ParamInfo* ParameterStore::find(const std::string& name) const {
  for (const ParamInfo& p : infos_)
    if (p.name == name) return &p;
  return nullptr;
}

const ParamInfo& ParameterStore::info(const std::string& name) const {
  const ParamInfo* p = find(name);
  LAB_CHECK(p, InvalidArgument, "no parameter named '", name, "'");
  return *p;
}

const Var& ParameterStore::var(const std::string& name) const {
  LAB_CHECK(allocated(), InvalidArgument, "parameters not allocated yet");
  return vars_[static_cast<size_t>(&info(name) - infos_.data())];
}

Tensor ParameterStore::value(const std::string& name) const {
  return var(name).value();
}

Tensor ParameterStore::grad(const std::string& name) const {
  return var(name).grad();
}

int64_t ParameterStore::decay_numel() const {
  LAB_CHECK(order_ == ParameterOrder::DecayFirst, InvalidArgument,
            "decay_numel(): this parameter layout is in backward order, where the decayed parameters are not one "
            "range at the front; use decay_ranges()");
  return decay_ranges_.empty() ? 0 : align_up(decay_ranges_.back().end);
}

void ParameterStore::zero_grad() {
  if (grads_.defined()) {
    grads_.zero_();
    return;
  }
  for (const Var& v : vars_) v.bind_grad(Tensor());
}

void ParameterStore::start_new_gradients() {
  // On the CPU one memset of the whole buffer costs less than writing over does there: OpenBLAS's sgemm with beta = 0
  // clears C in a pass of its own, which took longer than the one large memset it replaces (parameters.h).
  if (!grads_.defined() || !device_.is_cuda()) {
    zero_grad();
    return;
  }
  for (const Var& v : vars_) v.mark_grad_stale();
}

void ParameterStore::zero_unwritten_grads() {
  for (const Var& v : vars_)
    if (v.grad_stale()) v.grad();  // zero-fills it
}

void ParameterStore::release_flat_grads() {
  LAB_CHECK(allocated(), InvalidArgument, "release_flat_grads(): parameters not allocated yet");
  grads_ = Tensor();
  for (const Var& v : vars_) v.bind_grad(Tensor());
}

void ParameterStore::release_flat_params() {
  LAB_CHECK(allocated(), InvalidArgument, "release_flat_params(): parameters not allocated yet");
  params_ = Tensor();
  for (const Var& v : vars_) v.bind_value(Tensor());
}

void ParameterStore::restore_flat_params(Tensor flat) {
  LAB_CHECK(allocated() && flat.numel() == total_ && flat.dtype() == DType::F32 && flat.device() == device_,
            InvalidArgument, "restore_flat_params(): a buffer of ", flat.numel(), " elements on ", flat.device().str(),
            " for a store of ", total_, " on ", device_.str());
  params_ = std::move(flat);
  for (size_t i = 0; i < infos_.size(); ++i) vars_[i].bind_value(params_.view(infos_[i].offset, infos_[i].shape));
}

int64_t ParameterStore::num_parameters() const {
  int64_t n = 0;
  for (const ParamInfo& p : infos_) n += p.numel();
  return n;
}

}  // namespace lab
