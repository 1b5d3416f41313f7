// AdamW over the flat buffers, whole, per parameter or sharded; the global gradient norm and clipping (see
// adamw.h).
#include "common/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/ops/reduce.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/pinned.h"
#endif

namespace lab {

namespace {

int64_t total_size(const std::vector<ElementRange>& ranges) {
  int64_t n = 0;
  for (const ElementRange& r : ranges) n += r.size();
  return n;
}

// `numel` zero floats in pinned host memory: the GPU's copy engines read and write it directly.
Tensor pinned_host_zeros(int64_t numel) {
#ifdef LAB_WITH_CUDA
  auto buffer = std::make_shared<cuda::PinnedBuffer>(static_cast<size_t>(numel) * sizeof(float));
  Tensor t = Tensor::wrap(buffer->data(), {numel}, DType::F32, Device::cpu(), [buffer] {});
  t.zero_();
  return t;
#else
  (void)numel;
  fail(ErrorKind::Unsupported, "optimizer state in pinned host memory needs the CUDA backend");
#endif
}

// The parts of `decay` inside `range`, relative to range.begin: the decay ranges of an update of that range.
std::vector<ElementRange> decay_within(const std::vector<ElementRange>& decay, const ElementRange& range) {
  std::vector<ElementRange> out;
  for (const ElementRange& d : decay) {
    const int64_t begin = std::max(d.begin, range.begin), end = std::min(d.end, range.end);
    if (begin < end) out.push_back({begin - range.begin, end - range.begin});
  }
  return out;
}

}  // namespace

AdamW::AdamW(ParameterStore& params, const AdamWConfig& config) : AdamW(params, config, OptimizerState::Device) {}

AdamW::AdamW(ParameterStore& params, const AdamWConfig& config, OptimizerState state, int64_t offload_chunk_elements)
    : params_(params), config_(config) {
  LAB_CHECK(params.allocated(), InvalidArgument, "AdamW needs allocated parameters");
  owned_ = {{0, params.numel()}};
  if (state == OptimizerState::Host && params.device().is_cuda()) {
    m_ = pinned_host_zeros(params.numel());
    v_ = pinned_host_zeros(params.numel());
    master_ = pinned_host_zeros(params.numel());
    host_grads_ = pinned_host_zeros(params.numel());
    pipeline_ = std::make_unique<OffloadPipeline>(params.device(), params.numel(), offload_chunk_elements);
    return;
  }
  // On the parameters' device; with parameters on the CPU that is host memory already, offloaded or not.
  MemoryScope scope(MemCategory::Optimizer);
  m_ = Tensor::zeros({params.numel()}, DType::F32, params.device());
  v_ = Tensor::zeros({params.numel()}, DType::F32, params.device());
}

AdamW::~AdamW() = default;

AdamW::AdamW(ParameterStore& params, const AdamWConfig& config, std::vector<ElementRange> owned)
    : params_(params), config_(config), owned_(std::move(owned)), sharded_(true) {
  LAB_CHECK(params.allocated(), InvalidArgument, "AdamW needs allocated parameters");
  int64_t previous_end = 0;
  for (const ElementRange& r : owned_) {
    LAB_CHECK(previous_end <= r.begin && r.begin <= r.end && r.end <= params.numel(), InvalidArgument,
              "AdamW: owned range [", r.begin, ", ", r.end, ") is not sorted, disjoint and inside [0, ", params.numel(),
              ")");
    previous_end = r.end;
  }
  MemoryScope scope(MemCategory::Optimizer);
  m_ = Tensor::zeros({total_size(owned_)}, DType::F32, params.device());
  v_ = Tensor::zeros({total_size(owned_)}, DType::F32, params.device());
}

ops::AdamWHyper AdamW::hyper(float lr) const {
  if (step_values_.defined())
    LAB_CHECK(staged_for_ == step_, InvalidArgument, "AdamW: step ", step_, " runs with the values staged for step ",
              staged_for_, " (call stage_step before each step)");
  return {lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, step_, step_values_};
}

void AdamW::stage_step(float lr) {
  LAB_CHECK(!offloaded(), InvalidArgument, "AdamW::stage_step: an offloaded optimizer updates on the CPU");
  if (!step_values_.defined()) {
    MemoryScope scope(MemCategory::Optimizer);
    step_values_ = Tensor::empty({ops::kStepValues}, DType::F32, params_.device());
  }
  const ops::AdamWHyper next{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, step_ + 1, {}};
  step_values_.copy_from(Tensor::from_floats(ops::adamw_step_values(next), {ops::kStepValues}));
  staged_for_ = next.step;
}

void AdamW::step(float lr, const ops::GradScale& grad_scale) {
  whole_step(lr, grad_scale, Tensor());
}

void AdamW::step_with_16bit_copy(float lr, const ops::GradScale& grad_scale, const Tensor& params_16bit) {
  LAB_CHECK(!sharded_ && !offloaded(), InvalidArgument, "AdamW::step_with_16bit_copy: a ",
            sharded_ ? "sharded" : "offloaded", " optimizer does not update the whole buffer where its copy lives");
  LAB_CHECK(params_16bit.defined(), InvalidArgument, "AdamW::step_with_16bit_copy: no 16-bit copy");
  whole_step(lr, grad_scale, params_16bit);
}

void AdamW::whole_step(float lr, const ops::GradScale& grad_scale, const Tensor& params_16bit) {
  ++step_;
  if (offloaded()) {
    host_step(lr, grad_scale);
    return;
  }
  if (!sharded_) {  // the whole buffer in one pass
    ops::adamw_update(params_.params(), params_.grads(), m_, v_, hyper(lr), grad_scale, params_.decay_ranges(),
                      params_16bit);
    return;
  }
  int64_t state_offset = 0;
  for (const ElementRange& r : owned_) {
    update_range(r, flat_params(r), state_offset, params_.grads().view(r.begin, {r.size()}), hyper(lr), grad_scale);
    state_offset += r.size();
  }
}

void AdamW::host_step(float lr, const ops::GradScale& device_or_host_scale) {
  const ops::GradScale grad_scale(device_or_host_scale.read());
  if (!std::isfinite(grad_scale.value)) return;  // a skipped step (ops/adamw.h): nothing to move either way
  if (!master_current_) {
    master_.copy_from(params_.params());
    master_current_ = true;
  }
  const ops::AdamWHyper h = hyper(lr);
  pipeline_->step(params_.params(), params_.grads(), master_, host_grads_, [&](const ElementRange& r) {
    // The master copy stands in for the parameters; the moments are whole, so their offset is the range's.
    update_range(r, master_.view(r.begin, {r.size()}), r.begin, host_grads_.view(r.begin, {r.size()}), h, grad_scale);
  });
}

void AdamW::step(float lr, const ops::GradScale& grad_scale, const Tensor& owned_grads) {
  step(lr, grad_scale, owned_grads, Tensor());
}

void AdamW::step(float lr, const ops::GradScale& grad_scale, const Tensor& owned_grads, const Tensor& owned_params) {
  LAB_CHECK(owned_grads.numel() == m_.numel() && (!owned_params.defined() || owned_params.numel() == m_.numel()),
            InvalidArgument, "AdamW::step: ", owned_grads.numel(), " gradients and ",
            owned_params.defined() ? owned_params.numel() : m_.numel(), " parameters for ", m_.numel(),
            " owned elements");
  ++step_;
  int64_t state_offset = 0;
  for (const ElementRange& r : owned_) {
    const Shape shape{r.size()};
    update_range(r, owned_params.defined() ? owned_params.view(state_offset, shape) : flat_params(r), state_offset,
                 owned_grads.view(state_offset, shape), hyper(lr), grad_scale);
    state_offset += r.size();
  }
}

void AdamW::update(const std::string& name, const Tensor& grad, float lr, const Tensor& params_16bit) {
  LAB_CHECK(!sharded_ && !offloaded(), InvalidArgument, "AdamW::update('", name,
            "'): a sharded or offloaded optimizer updates whole steps only");
  LAB_CHECK(step_ >= 1, InvalidArgument, "AdamW::update('", name, "') before begin_step()");
  LAB_CHECK(!step_values_.defined(), InvalidArgument, "AdamW::update('", name,
            "'): the step values are staged on the device for whole steps only");
  const ParamInfo& p = params_.info(name);
  const ElementRange range{p.offset, p.offset + p.numel()};
  LAB_CHECK(!params_16bit.defined() || params_16bit.numel() == params_.numel(), InvalidArgument, "AdamW::update('",
            name, "'): a 16-bit copy of ", params_16bit.numel(), " elements for ", params_.numel(), " parameters");
  update_range(range, flat_params(range), p.offset, grad.view(0, {p.numel()}), hyper(lr), 1.0f,
               params_16bit.defined() ? params_16bit.view(range.begin, {range.size()}) : Tensor());
}

Tensor AdamW::flat_params(const ElementRange& range) const {
  return params_.params().view(range.begin, {range.size()});
}

void AdamW::update_range(const ElementRange& range, const Tensor& params, int64_t state_offset, const Tensor& grads,
                         const ops::AdamWHyper& hyper, const ops::GradScale& grad_scale, const Tensor& copy) {
  if (range.size() == 0) return;
  const Shape shape{range.size()};
  ops::adamw_update(params, grads, m_.view(state_offset, shape), v_.view(state_offset, shape), hyper, grad_scale,
                    decay_within(params_.decay_ranges(), range), copy);
}

Tensor AdamW::m(const std::string& name) const {
  LAB_CHECK(!sharded_, InvalidArgument, "AdamW::m('", name, "'): the optimizer is sharded");
  const ParamInfo& p = params_.info(name);
  return m_.view(p.offset, p.shape);
}

Tensor AdamW::v(const std::string& name) const {
  LAB_CHECK(!sharded_, InvalidArgument, "AdamW::v('", name, "'): the optimizer is sharded");
  const ParamInfo& p = params_.info(name);
  return v_.view(p.offset, p.shape);
}

double global_grad_norm(const ParameterStore& params) {
  return std::sqrt(ops::sum_squares(params.grads()));
}

float clip_coefficient(double grad_norm, double max_norm) {
  return ops::clip_coefficient(grad_norm, max_norm);
}

}  // namespace lab
