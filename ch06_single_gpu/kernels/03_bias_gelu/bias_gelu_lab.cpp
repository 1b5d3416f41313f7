// The bias + GELU lab's versions and their validation (see bias_gelu_lab.h).
//
// Outputs are filled with NaN before a version runs (an element it forgets to write fails), and dbias starts
// from random values (a version that overwrites it instead of adding fails).
#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_lab.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_versions.h"
#include "common/ops/gelu.h"
#include "common/ops/linear.h"
#include "common/util/rng.h"

#ifdef LAB_WITH_CUDA
#include "ch06_single_gpu/matmul_bias_gelu.h"
#endif

namespace lab::ch06 {

namespace {

using kernel_lab::Check;
using kernel_lab::KernelLab;
using kernel_lab::Version;

Tensor random_tensor(const Shape& shape, Rng& rng, float std) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = rng.normal(0.0f, std);
  return Tensor::from_floats(values, shape);
}

// Every tensor of the set copied to `device` (undefined ones stay undefined).
template <typename Set>
Set copy_to(const Set& set, Device device);

void fill_nan(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->defined()) t->fill_(std::numeric_limits<float>::quiet_NaN());
}

// Adds a version whose run is fn(t) on its own copy `t` of the lab's tensors on `device`; validate() resets
// `t`'s outputs (`reset`), runs fn once and returns `checks(t)`.
template <typename Set>
void add_version(KernelLab& lab, std::string name, std::string what_changes, Device device, const Set& inputs,
                 std::function<void(const Set&)> fn, std::function<void(const Set&)> reset,
                 std::function<std::vector<Check>(const Set&)> checks) {
  const Set t = copy_to(inputs, device);
  Version v;
  v.name = std::move(name);
  v.what_changes = std::move(what_changes);
  v.device = device;
  v.run = [t, fn] { fn(t); };
  v.validate = [t, fn, reset, checks] {
    reset(t);
    fn(t);
    return checks(t);
  };
  lab.add(std::move(v));
}

// ================================================================ the reference: the core's GELU

// pre = x + bias, then common/ops' GELU.
void reference_forward(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& bias) {
  const int64_t OC = bias.numel();
  const std::vector<float> xs = x.to_floats(), bs = bias.to_floats();
  std::vector<float> h(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) h[i] = xs[i] + bs[i % static_cast<size_t>(OC)];
  pre.copy_from(Tensor::from_floats(h, pre.shape()));
  ops::cpu::gelu_forward(out, pre);
}

// dx = common/ops' GELU backward, written over dx; dbias += the column sums of dx, added row after row.
void reference_backward(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& pre) {
  ops::cpu::gelu_backward(dx, pre, dout, ops::GradWrite::Overwrite);
  const int64_t OC = dbias.numel();
  const std::vector<float> g = dx.to_floats();
  std::vector<float> sums = dbias.to_floats();
  for (size_t i = 0; i < g.size(); ++i) sums[i % static_cast<size_t>(OC)] += g[i];
  dbias.copy_from(Tensor::from_floats(sums, dbias.shape()));
}

// ================================================================ forward: out = gelu(x + bias)

struct ForwardSet {
  Tensor x, bias;   // inputs
  Tensor out, pre;  // outputs (pre: the versions that keep the pre-activation)
};

template <>
ForwardSet copy_to(const ForwardSet& s, Device device) {
  return {s.x.to(device), s.bias.to(device), s.out.to(device), s.pre.to(device)};
}

KernelLab forward_lab(const BiasGeluProblem& p) {
  const double n = static_cast<double>(p.rows) * static_cast<double>(p.columns);
  // Read x, write out (the fused minimum). FLOPs per element: the bias add, v^3 and the polynomial (4), the
  // exponential's argument (1), the exponential and the division (counted one each), 1 + (1).
  KernelLab lab("bias_gelu_forward", cat("out = gelu(x + bias), N=", p.rows, " rows, OC=", p.columns, ", fp32"),
                {.flops = 9.0 * n, .bytes = 8.0 * n + 4.0 * static_cast<double>(p.columns)});
  Rng rng(p.seed);
  ForwardSet in{random_tensor({p.rows, p.columns}, rng, p.spread), random_tensor({p.columns}, rng, 0.5f),
                Tensor::empty({p.rows, p.columns}, DType::F32), Tensor::empty({p.rows, p.columns}, DType::F32)};
  const ForwardSet expected = copy_to(in, Device::cpu());
  reference_forward(expected.out, expected.pre, expected.x, expected.bias);
  const Tolerance tol = tolerance_for(DType::F32, 1);
  const auto reset = [](const ForwardSet& t) { fill_nan({&t.out, &t.pre}); };
  const auto out_and_pre = [expected, tol](const ForwardSet& t) {
    return std::vector<Check>{Check::close("out", t.out, expected.out, tol),
                              Check::close("pre", t.pre, expected.pre, tol)};
  };
  const auto out_only = [expected, tol](const ForwardSet& t) {
    return std::vector<Check>{Check::close("out", t.out, expected.out, tol)};
  };
  using Fn = std::function<void(const ForwardSet&)>;

#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const Device gpu = Device::cuda(0);
    add_version<ForwardSet>(lab, "separate kernels", "bias kernel writes pre, the core's GELU kernel reads it back",
                            gpu, in, Fn([](const ForwardSet& t) { bias_gelu::forward_v1(t.out, t.pre, t.x, t.bias); }),
                            reset, out_and_pre);
    add_version<ForwardSet>(lab, "fused, float4", "one pass: gelu(x + bias) from x, 128-bit loads and stores", gpu, in,
                            Fn([](const ForwardSet& t) { bias_gelu::forward_v2(t.out, t.x, t.bias); }), reset,
                            out_only);
  }
#endif
  add_version<ForwardSet>(
      lab, "CPU separate passes", "the bias pass writes pre, the core's GELU pass reads it", Device::cpu(), in,
      Fn([](const ForwardSet& t) { bias_gelu::cpu_forward_separate(t.out, t.pre, t.x, t.bias); }), reset, out_and_pre);
  add_version<ForwardSet>(lab, "CPU fused pass", "one pass: gelu(x + bias) straight from x", Device::cpu(), in,
                          Fn([](const ForwardSet& t) { bias_gelu::cpu_forward_fused(t.out, t.x, t.bias); }), reset,
                          out_only);
  return lab;
}

// ================================================================ backward: dx, dbias

struct BackwardSet {
  Tensor dout, x, bias, pre;  // inputs (pre = x + bias, for the versions that keep it)
  Tensor dx, dbias;           // outputs; dbias accumulates
  Tensor dbias_initial;
};

template <>
BackwardSet copy_to(const BackwardSet& s, Device device) {
  return {s.dout.to(device), s.x.to(device),     s.bias.to(device),         s.pre.to(device),
          s.dx.to(device),   s.dbias.to(device), s.dbias_initial.to(device)};
}

KernelLab backward_lab(const BiasGeluProblem& p) {
  const double n = static_cast<double>(p.rows) * static_cast<double>(p.columns);
  // Read x and dout, write dx. FLOPs per element: the bias add, the sigmoid (7, as forward), the slope (8),
  // the product with dout and the sum into dbias.
  KernelLab lab("bias_gelu_backward",
                cat("dx = gelu'(x + bias) * dout, dbias += colsum(dx), N=", p.rows, " rows, OC=", p.columns, ", fp32"),
                {.flops = 18.0 * n, .bytes = 12.0 * n + 12.0 * static_cast<double>(p.columns)});
  Rng rng(p.seed);
  const Shape shape{p.rows, p.columns};
  BackwardSet in{random_tensor(shape, rng, 1.0f),       random_tensor(shape, rng, p.spread),
                 random_tensor({p.columns}, rng, 0.5f), Tensor::empty(shape, DType::F32),
                 Tensor::empty(shape, DType::F32),      Tensor(),
                 random_tensor({p.columns}, rng, 1.0f)};
  in.dbias = in.dbias_initial.clone();
  // pre as a forward leaves it: x + bias, the same single rounding on every backend.
  reference_forward(Tensor::empty(shape, DType::F32), in.pre, in.x, in.bias);
  const BackwardSet expected = copy_to(in, Device::cpu());
  reference_backward(expected.dx, expected.dbias, expected.dout, expected.pre);
  const auto reset = [](const BackwardSet& t) {
    fill_nan({&t.dx});
    t.dbias.copy_from(t.dbias_initial);
  };
  const auto checks = [expected, N = p.rows](const BackwardSet& t) {
    return std::vector<Check>{Check::close("dx", t.dx, expected.dx, tolerance_for(DType::F32, 1)),
                              Check::close("dbias", t.dbias, expected.dbias, tolerance_for(DType::F32, N))};
  };
  using Fn = std::function<void(const BackwardSet&)>;

#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const Device gpu = Device::cuda(0);
    add_version<BackwardSet>(
        lab, "separate kernels", "GELU's backward writes dx, column sums re-read it (3 kernels)", gpu, in,
        Fn([](const BackwardSet& t) { bias_gelu::backward_v1(t.dx, t.dbias, t.dout, t.pre); }), reset, checks);
    add_version<BackwardSet>(
        lab, "fused, float4", "dx and dbias's partial sums in one pass, dx never read back", gpu, in,
        Fn([](const BackwardSet& t) { bias_gelu::backward_v2(t.dx, t.dbias, t.dout, t.x, t.bias); }), reset, checks);
  }
#endif
  add_version<BackwardSet>(
      lab, "CPU separate passes", "GELU's backward pass writes dx, a column-sum pass reads it back", Device::cpu(), in,
      Fn([](const BackwardSet& t) { bias_gelu::cpu_backward_separate(t.dx, t.dbias, t.dout, t.pre); }), reset, checks);
  add_version<BackwardSet>(
      lab, "CPU fused pass", "one pass: dx written and added into per-chunk dbias sums", Device::cpu(), in,
      Fn([](const BackwardSet& t) { bias_gelu::cpu_backward_fused(t.dx, t.dbias, t.dout, t.x, t.bias); }), reset,
      checks);
  return lab;
}

// ================================================================ with the GEMM: gelu(inp @ weight^T + bias)

struct LinearSet {
  Tensor inp, weight, bias;  // inputs
  Tensor x;                  // the GEMM's output before its bias (v1, v2)
  Tensor out, pre;           // outputs
};

#ifdef LAB_WITH_CUDA  // the GEMM pass has GPU versions only
template <>
LinearSet copy_to(const LinearSet& s, Device device) {
  return {s.inp.to(device), s.weight.to(device), s.bias.to(device), s.x.to(device), s.out.to(device), s.pre.to(device)};
}
#endif

KernelLab linear_lab(const BiasGeluProblem& p) {
  const double N = static_cast<double>(p.rows), C = static_cast<double>(p.inputs), OC = static_cast<double>(p.columns);
  // Read inp and weight, write out and pre (which GELU's backward needs); the GEMM's 2 N C OC FLOPs.
  KernelLab lab("linear_bias_gelu_forward",
                cat("out = gelu(inp @ weight^T + bias), N=", p.rows, ", C=", p.inputs, ", OC=", p.columns,
                    ", fp32 (strict unless TF32 is switched on)"),
                {.flops = 2.0 * N * C * OC + 9.0 * N * OC, .bytes = 4.0 * (N * C + OC * C + OC) + 8.0 * N * OC});
#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    Rng rng(p.seed);
    const Shape shape{p.rows, p.columns};
    // weight = N(0, spread / sqrt(C)), so that the product has about the given spread.
    LinearSet in{random_tensor({p.rows, p.inputs}, rng, 1.0f),
                 random_tensor({p.columns, p.inputs}, rng, p.spread / std::sqrt(static_cast<float>(p.inputs))),
                 random_tensor({p.columns}, rng, 0.5f),
                 Tensor::empty(shape, DType::F32),
                 Tensor::empty(shape, DType::F32),
                 Tensor::empty(shape, DType::F32)};
    const LinearSet expected = copy_to(in, Device::cpu());
    ops::cpu::linear_forward(expected.pre, expected.inp, expected.weight, expected.bias);
    ops::cpu::gelu_forward(expected.out, expected.pre);
    const Tolerance tol = tolerance_for(DType::F32, p.inputs);
    const auto reset = [](const LinearSet& t) { fill_nan({&t.x, &t.out, &t.pre}); };
    const auto out_and_pre = [expected, tol](const LinearSet& t) {
      return std::vector<Check>{Check::close("out", t.out, expected.out, tol),
                                Check::close("pre", t.pre, expected.pre, tol)};
    };
    const auto out_only = [expected, tol](const LinearSet& t) {
      return std::vector<Check>{Check::close("out", t.out, expected.out, tol)};
    };
    using Fn = std::function<void(const LinearSet&)>;
    const Device gpu = Device::cuda(0);
    add_version<LinearSet>(lab, "GEMM, then separate kernels", "cuBLAS sgemm writes x; bias, then GELU kernels", gpu,
                           in, Fn([](const LinearSet& t) {
                             ops::cuda::linear_forward(t.x, t.inp, t.weight, Tensor());
                             bias_gelu::forward_v1(t.out, t.pre, t.x, t.bias);
                           }),
                           reset, out_and_pre);
    add_version<LinearSet>(lab, "GEMM, then the fused kernel", "cuBLAS sgemm writes x; one bias + GELU pass", gpu, in,
                           Fn([](const LinearSet& t) {
                             ops::cuda::linear_forward(t.x, t.inp, t.weight, Tensor());
                             bias_gelu::forward_v2(t.out, t.x, t.bias);
                           }),
                           reset, out_only);
    add_version<LinearSet>(
        lab, "GEMM epilogue", "cuBLASLt GELU_AUX_BIAS: bias and GELU on each tile in registers, no extra pass", gpu, in,
        Fn([](const LinearSet& t) { matmul_bias_gelu(t.out, t.pre, t.inp, t.weight, t.bias); }), reset, out_and_pre);
  }
#endif
  return lab;
}

}  // namespace

KernelLab make_bias_gelu_lab(const BiasGeluProblem& problem, BiasGeluPass pass) {
  LAB_CHECK(problem.rows > 0 && problem.columns > 0 && problem.inputs > 0 && problem.spread > 0, InvalidArgument,
            "bias_gelu lab: rows, columns, inputs and spread must be positive");
  switch (pass) {
    case BiasGeluPass::Forward: return forward_lab(problem);
    case BiasGeluPass::Backward: return backward_lab(problem);
    case BiasGeluPass::LinearForward: return linear_lab(problem);
  }
  fail(ErrorKind::InvalidArgument, "bias_gelu lab: unknown pass");
}

}  // namespace lab::ch06
