#include "common/nn/parameters.h"

#include <algorithm>

namespace lab {

namespace {
constexpr int64_t kAlign = 32;
int64_t align_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

void ParameterStore::declare(const std::string& name, const Shape& shape, bool decay) {
  LAB_CHECK(!allocated(), InvalidArgument, "declare('", name, "') after the parameters were allocated");
  LAB_CHECK(find(name) == nullptr, InvalidArgument, "parameter '", name, "' declared twice");
  infos_.push_back({name, shape, 0, decay});
}

void ParameterStore::allocate(Device device) {
  LAB_CHECK(!allocated(), InvalidArgument, "parameters allocated twice");
  // Decayed parameters first, each group in declaration order.
  std::stable_partition(infos_.begin(), infos_.end(), [](const ParamInfo& p) { return p.decay; });
  int64_t offset = 0;
  for (ParamInfo& p : infos_) {
    if (p.decay) decay_end_ = align_up(offset + p.numel());
    p.offset = offset;
    offset = align_up(offset + p.numel());
  }
  total_ = offset;
  {
    MemoryScope scope(MemCategory::Params);
    params_ = Tensor::zeros({total_}, DType::F32, device);
  }
  {
    MemoryScope scope(MemCategory::Grads);
    grads_ = Tensor::zeros({total_}, DType::F32, device);
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

Tensor ParameterStore::value(const std::string& name) const {
  LAB_CHECK(allocated(), InvalidArgument, "parameters not allocated yet");
  const ParamInfo& p = info(name);
  return params_.view(p.offset, p.shape);
}

Tensor ParameterStore::grad(const std::string& name) const {
  LAB_CHECK(allocated(), InvalidArgument, "parameters not allocated yet");
  const ParamInfo& p = info(name);
  return grads_.view(p.offset, p.shape);
}

Var ParameterStore::var(const std::string& name) const {
  return Var::parameter(value(name), grad(name));
}

int64_t ParameterStore::num_parameters() const {
  int64_t n = 0;
  for (const ParamInfo& p : infos_) n += p.numel();
  return n;
}

}  // namespace lab
