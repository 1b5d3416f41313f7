// The AdamW lab's versions and their validation (see adamw_lab.h).
//
// Validation: the version's parameters (and master weights) and moments are reset to the inputs, one step
// runs, and the results are compared with the CPU reference: parameters, master weights and moments within
// fp32 rounding; bf16 parameters exactly equal to the version's own master weights rounded (to nearest, or
// stochastically with the lab's seed: the bits of the rounding are part of the contract). Versions on one device
// share their buffers (they run one after another); every timed repeat is one more step from where the previous
// one left the state.
#include "ch06_single_gpu/kernels/05_adamw/adamw_lab.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ch06_single_gpu/flat_adamw.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_versions.h"
#include "common/util/rng.h"

namespace lab::ch06 {

namespace {

using kernel_lab::Check;
using kernel_lab::KernelLab;
using kernel_lab::Version;

// One step's state, flat. fp32 table: params f32, no master. bf16 table: params bf16, master f32.
struct Buffers {
  Tensor params, master, grads, m, v;
};

Tensor copy_to(const Tensor& t, Device device) {
  return t.defined() ? t.to(device) : Tensor();
}

Buffers buffers_on(const Buffers& in, Device device) {
  return {copy_to(in.params, device), copy_to(in.master, device), copy_to(in.grads, device), copy_to(in.m, device),
          copy_to(in.v, device)};
}

// Random state inside every tensor of the layout, zeros in the padding: weights N(0, 0.02), gradients and first
// moments N(0, 0.01), second moments the square of an N(0, 0.01) draw.
Buffers random_inputs(const AdamWProblem& p, const ParameterStore& layout) {
  const auto n = static_cast<size_t>(layout.numel());
  std::vector<float> params(n, 0.0f), grads(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  Rng rng(p.seed);
  for (const ParamInfo& info : layout.infos())
    for (int64_t i = info.offset; i < info.offset + info.numel(); ++i) {
      const auto k = static_cast<size_t>(i);
      params[k] = rng.normal(0.0f, 0.02f);
      grads[k] = rng.normal(0.0f, 0.01f);
      m[k] = rng.normal(0.0f, 0.01f);
      const float s = rng.normal(0.0f, 0.01f);
      v[k] = s * s;
    }
  const Shape shape{layout.numel()};
  Buffers b{Tensor::from_floats(params, shape), Tensor(), Tensor::from_floats(grads, shape),
            Tensor::from_floats(m, shape), Tensor::from_floats(v, shape)};
  if (p.table == AdamWTable::BF16) {
    b.master = b.params;
    b.params = b.master.to_dtype(DType::BF16);
    if (p.grad_dtype == DType::BF16) b.grads = b.grads.to_dtype(DType::BF16);
  }
  return b;
}

// `master` (f32, any device) rounded to bf16 as `rounding` says, element by element: what the version's bf16
// parameters must hold, bit for bit.
Tensor rounded_to_bf16(const Tensor& master, Bf16Rounding rounding) {
  const std::vector<float> w = master.to_floats();
  const Tensor out = Tensor::empty(master.shape(), DType::BF16);
  uint16_t* bits = static_cast<uint16_t*>(out.raw());
  for (size_t i = 0; i < w.size(); ++i)
    bits[i] = rounding.stochastic ? adamw::bf16_round_stochastic(w[i], adamw::random_bits(rounding.seed, i))
                                  : adamw::bf16_round_nearest(w[i]);
  return out;
}

struct AdamWLab {
  KernelLab& lab;
  Buffers inputs;    // on the CPU
  Buffers expected;  // the reference's step: params (fp32 table) or master (bf16 table), m, v
  Tolerance tol;

  // `rounding`: the bf16 table's versions, whose bf16 parameters are checked against their master weights.
  void add(std::string name, std::string what_changes, const Buffers& t, std::function<void(const Buffers&)> fn,
           std::optional<Bf16Rounding> rounding = std::nullopt) {
    Version v;
    v.name = std::move(name);
    v.what_changes = std::move(what_changes);
    v.device = t.params.device();
    v.precision = rounding ? bench::Precision::BF16 : bench::Precision::FP32;
    v.run = [t, fn] { fn(t); };
    v.validate = [t, fn, rounding, in = inputs, e = expected, tol = tol] {
      for (const auto& [out, initial] : {std::pair{&t.params, &in.params}, std::pair{&t.master, &in.master},
                                         std::pair{&t.m, &in.m}, std::pair{&t.v, &in.v}})
        if (out->defined()) out->copy_from(*initial);
      fn(t);
      std::vector<Check> checks{Check::close("m", t.m, e.m, tol), Check::close("v", t.v, e.v, tol)};
      if (rounding) {
        checks.push_back(Check::close("master", t.master, e.master, tol));
        checks.push_back(Check::close("bf16 params", t.params, rounded_to_bf16(t.master, *rounding), Tolerance{}));
      } else {
        checks.push_back(Check::close("params", t.params, e.params, tol));
      }
      return checks;
    };
    lab.add(std::move(v));
  }
};

// Views of the flat buffers, one set per tensor of the layout.
std::vector<adamw::TensorSet> tensor_sets(const Buffers& b, const std::vector<ParamInfo>& infos) {
  std::vector<adamw::TensorSet> sets;
  for (const ParamInfo& info : infos) {
    auto view = [&](const Tensor& t) { return t.view(info.offset, {info.numel()}); };
    sets.push_back({view(b.params), view(b.grads), view(b.m), view(b.v), info.decay});
  }
  return sets;
}

std::string problem_text(const AdamWProblem& p, const ParameterStore& layout) {
  const char* what = p.table == AdamWTable::FP32   ? "fp32"
                     : p.grad_dtype == DType::BF16 ? "bf16 params and grads, fp32 master and moments"
                                                   : "bf16 params, fp32 master, grads and moments";
  int64_t decayed = 0;
  for (const ElementRange& r : layout.decay_ranges()) decayed += r.size();
  return cat(layout.infos().size(), " tensors, ", layout.numel(), " elements (", decayed, " with weight decay, in ",
             layout.decay_ranges().size(), " ranges), ", what, ", step ", p.hyper.step);
}

void add_fp32_versions(AdamWLab& al, const AdamWProblem& p, const ParameterStore& layout) {
  const ops::AdamWHyper hyper = p.hyper;
  const float scale = p.grad_scale;
  const std::vector<ElementRange> decay = layout.decay_ranges();
  const auto core_flat = [hyper, scale, decay](const Buffers& b) {
    ops::adamw_update(b.params, b.grads, b.m, b.v, hyper, scale, decay);
  };
  const auto flat = [hyper, scale, decay](const Buffers& b) {
    flat_adamw(b.params, b.grads, b.m, b.v, hyper, scale, decay);
  };
#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const Buffers gpu = buffers_on(al.inputs, Device::cuda(0));
    const std::vector<adamw::TensorSet> sets = tensor_sets(gpu, layout.infos());
    al.add("one launch per tensor", "the core's kernel called per tensor, as an optimizer walking its list", gpu,
           [sets, hyper, scale](const Buffers&) { adamw::per_tensor_adamw(sets, hyper, scale); });
    al.add("multi-tensor apply", "Apex: chunks of 64K elements of up to 36 tensors, 320 blocks a launch", gpu,
           [sets, hyper, scale](const Buffers&) { adamw::multi_tensor_adamw(sets, hyper, scale); });
    al.add("flat buffer, one launch (the core's)", "no list: one grid over the flat buffer, decay ranges searched", gpu,
           core_flat);
    al.add("flat buffer, float4 (promoted)", "4 elements a thread, 128-bit accesses, one range search per vector", gpu,
           flat);
  }
#endif
  const Buffers cpu = buffers_on(al.inputs, Device::cpu());
  const std::vector<adamw::TensorSet> sets = tensor_sets(cpu, layout.infos());
  al.add("CPU one loop per tensor", "ops::cpu per tensor: one OpenMP parallel loop per tensor", cpu,
         [sets, hyper, scale](const Buffers&) { adamw::per_tensor_adamw(sets, hyper, scale); });
  al.add("CPU flat buffer (the core's)", "ops::cpu over the flat buffer: one parallel loop per decay stretch", cpu,
         core_flat);
  al.add("CPU flat buffer, one parallel loop (promoted)", "threads share blocks; each walks its stretches", cpu, flat);
}

void add_bf16_versions(AdamWLab& al, const AdamWProblem& p, const ParameterStore& layout) {
  const ops::AdamWHyper hyper = p.hyper;
  const float scale = p.grad_scale;
  const std::vector<ElementRange> decay = layout.decay_ranges();
  const Bf16Rounding nearest{false, 0}, stochastic{true, p.seed};
  const auto step = [hyper, scale, decay](Bf16Rounding rounding) {
    return [hyper, scale, decay, rounding](const Buffers& b) {
      flat_adamw_bf16(b.params, b.master, b.grads, b.m, b.v, hyper, scale, decay, rounding);
    };
  };
#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const Buffers gpu = buffers_on(al.inputs, Device::cuda(0));
    al.add("bf16 + fp32 master, to nearest", "the flat fp32 update from the master; bf16 params written too", gpu,
           step(nearest), nearest);
    al.add("bf16 + fp32 master, stochastic", "rounding up with probability = the dropped fraction (seeded)", gpu,
           step(stochastic), stochastic);
  }
#endif
  const Buffers cpu = buffers_on(al.inputs, Device::cpu());
  al.add("CPU bf16 + fp32 master, to nearest", "the promoted op's CPU loop", cpu, step(nearest), nearest);
  al.add("CPU bf16 + fp32 master, stochastic", "a counter-based hash per element: same bits as the GPU's", cpu,
         step(stochastic), stochastic);
}

}  // namespace

KernelLab make_adamw_lab(const AdamWProblem& p, const ParameterStore& layout) {
  LAB_CHECK(layout.allocated(), InvalidArgument, "adamw lab: the layout's ParameterStore must be allocated");
  LAB_CHECK(p.grad_dtype == DType::F32 || (p.table == AdamWTable::BF16 && p.grad_dtype == DType::BF16), InvalidArgument,
            "adamw lab: gradients are f32, or bf16 in the bf16 table");
  const double n = static_cast<double>(layout.numel());
  // Bytes per element: read p, g, m, v and write p, m, v (fp32: 28); bf16 table: read master, g, m, v, write
  // master, m, v and the bf16 parameter (26 + the gradient's 4 or 2). FLOPs: the update's 17 (sqrt, divisions
  // counted as one each).
  const double bytes = p.table == AdamWTable::FP32 ? 28.0 : 26.0 + static_cast<double>(dtype_size(p.grad_dtype));
  KernelLab lab(p.table == AdamWTable::FP32 ? "adamw" : "adamw_bf16", problem_text(p, layout),
                {.flops = 17.0 * n, .bytes = bytes * n});
  const Buffers inputs = random_inputs(p, layout);
  Buffers expected = buffers_on(inputs, Device::cpu());
  // The reference: the core's CPU op, in fp32 (bf16 gradients are exact in fp32).
  if (p.table == AdamWTable::FP32) {
    ops::cpu::adamw_update(expected.params, expected.grads, expected.m, expected.v, p.hyper, p.grad_scale,
                           layout.decay_ranges());
  } else {
    const Tensor grads = p.grad_dtype == DType::BF16 ? expected.grads.to_dtype(DType::F32) : expected.grads;
    ops::cpu::adamw_update(expected.master, grads, expected.m, expected.v, p.hyper, p.grad_scale,
                           layout.decay_ranges());
  }
  AdamWLab al{lab, inputs, expected, tolerance_for(DType::F32, 1)};
  if (p.table == AdamWTable::FP32)
    add_fp32_versions(al, p, layout);
  else
    add_bf16_versions(al, p, layout);
  return lab;
}

}  // namespace lab::ch06
