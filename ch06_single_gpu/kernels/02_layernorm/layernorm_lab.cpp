// The LayerNorm lab's versions and their validation (see layernorm_lab.h).
//
// Validation: outputs are filled with NaN before a version runs (an element it forgets to write fails), and
// accumulated gradients start from random values (a version that overwrites instead of adding fails). Every
// version reads the CPU reference's mean and rstd in the backward, so all of them compare on identical inputs.
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_lab.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "common/ops/layernorm.h"
#include "common/ops/residual.h"
#include "common/util/rng.h"

#ifdef LAB_WITH_CUDA
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_versions.h"
#endif

namespace lab::ch06 {

namespace {

using kernel_lab::Check;
using kernel_lab::KernelLab;
using kernel_lab::Version;

Tensor random_tensor(const Shape& shape, Rng& rng, float mean, float std) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = rng.normal(mean, std);
  return Tensor::from_floats(values, shape);
}

void fill_nan(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) t->fill_(std::numeric_limits<float>::quiet_NaN());
}

// ================================================================ forward

struct ForwardTensors {
  Tensor a, b, weight, bias;         // inputs
  Tensor residual, out, mean, rstd;  // outputs
};
using ForwardFn = std::function<void(const ForwardTensors&)>;

// The inputs copied to `device`, with outputs of their own.
ForwardTensors forward_tensors_on(const ForwardTensors& in, Device device) {
  const int64_t N = in.mean.numel();
  return {in.a.to(device),
          in.b.to(device),
          in.weight.to(device),
          in.bias.to(device),
          Tensor::empty(in.a.shape(), DType::F32, device),
          Tensor::empty(in.a.shape(), DType::F32, device),
          Tensor::empty({N}, DType::F32, device),
          Tensor::empty({N}, DType::F32, device)};
}

// Random inputs on the CPU, with outputs of their own: a = offset + N(0, spread), b = N(0, spread); weight
// N(1, 0.5) and bias N(0, 0.5), so that a version mixing them up fails.
ForwardTensors random_forward_tensors(const LayerNormProblem& p, Rng& rng) {
  ForwardTensors t;
  t.a = random_tensor({p.rows, p.channels}, rng, p.offset, p.spread);
  t.b = random_tensor({p.rows, p.channels}, rng, 0.0f, p.spread);
  t.weight = random_tensor({p.channels}, rng, 1.0f, 0.5f);
  t.bias = random_tensor({p.channels}, rng, 0.0f, 0.5f);
  t.residual = Tensor::empty({p.rows, p.channels}, DType::F32);
  t.out = Tensor::empty({p.rows, p.channels}, DType::F32);
  t.mean = Tensor::empty({p.rows}, DType::F32);
  t.rstd = Tensor::empty({p.rows}, DType::F32);
  return t;
}

void reference_forward(const ForwardTensors& t) {
  ops::cpu::residual_forward(t.residual, t.a, t.b);
  ops::cpu::layernorm_forward(t.out, t.mean, t.rstd, t.residual, t.weight, t.bias);
}

void fused_forward(const ForwardTensors& t) {
  fused_residual_layernorm_forward(t.residual, t.out, t.mean, t.rstd, t.a, t.b, t.weight, t.bias);
}

struct ForwardLab {
  KernelLab& lab;
  ForwardTensors inputs;  // on the CPU
  ForwardTensors expected;
  Tolerance tol;

  void add(std::string name, std::string what_changes, Device device, ForwardFn fn) {
    const ForwardTensors t = forward_tensors_on(inputs, device);
    Version v;
    v.name = std::move(name);
    v.what_changes = std::move(what_changes);
    v.device = device;
    v.run = [t, fn] { fn(t); };
    v.validate = [t, fn, e = expected, tol = tol] {
      fill_nan({&t.residual, &t.out, &t.mean, &t.rstd});
      fn(t);
      return std::vector<Check>{Check::close("residual", t.residual, e.residual, tol),
                                Check::close("out", t.out, e.out, tol), Check::close("mean", t.mean, e.mean, tol),
                                Check::close("rstd", t.rstd, e.rstd, tol)};
    };
    lab.add(std::move(v));
  }
};

// ================================================================ backward

struct BackwardTensors {
  Tensor dout, dresidual, residual, weight, mean, rstd;  // inputs
  Tensor da, db, dweight, dbias;                         // accumulated outputs
  // The unfused versions' gradient of residual: it holds dresidual when the LayerNorm's backward adds its dx
  // into it (as the trainer's gradient buffer of h does), and the residual's backward then reads it.
  Tensor dresidual_total;
};
using BackwardFn = std::function<void(const BackwardTensors&)>;

BackwardTensors backward_tensors_on(const BackwardTensors& in, Device device) {
  return {in.dout.to(device),    in.dresidual.to(device), in.residual.to(device), in.weight.to(device),
          in.mean.to(device),    in.rstd.to(device),      in.da.to(device),       in.db.to(device),
          in.dweight.to(device), in.dbias.to(device),     in.dresidual.to(device)};
}

void reference_backward(const BackwardTensors& t) {
  ops::cpu::layernorm_backward(t.dresidual_total, t.dweight, t.dbias, t.dout, t.residual, t.weight, t.mean, t.rstd,
                               ops::GradWrite::Add, ops::GradWrite::Add);
  ops::cpu::residual_backward(t.da, t.db, t.dresidual_total);
}

void fused_backward(const BackwardTensors& t) {
  fused_residual_layernorm_backward(t.da, t.db, t.dweight, t.dbias, t.dresidual, t.dout, t.residual, t.weight, t.mean,
                                    t.rstd);
}

struct BackwardLab {
  KernelLab& lab;
  BackwardTensors inputs;  // on the CPU; da, db, dweight, dbias hold their initial values
  BackwardTensors expected;
  Tolerance tol;

  void add(std::string name, std::string what_changes, Device device, BackwardFn fn) {
    const BackwardTensors t = backward_tensors_on(inputs, device);
    Version v;
    v.name = std::move(name);
    v.what_changes = std::move(what_changes);
    v.device = device;
    v.run = [t, fn] { fn(t); };
    v.validate = [t, fn, in = inputs, e = expected, tol = tol] {
      for (const auto& [out, initial] :
           {std::pair{&t.da, &in.da}, std::pair{&t.db, &in.db}, std::pair{&t.dweight, &in.dweight},
            std::pair{&t.dbias, &in.dbias}, std::pair{&t.dresidual_total, &in.dresidual}})
        out->copy_from(*initial);
      fn(t);
      return std::vector<Check>{Check::close("da", t.da, e.da, tol), Check::close("db", t.db, e.db, tol),
                                Check::close("dweight", t.dweight, e.dweight, tol),
                                Check::close("dbias", t.dbias, e.dbias, tol)};
    };
    lab.add(std::move(v));
  }
};

// ================================================================ the versions

std::string problem_text(const LayerNormProblem& p) {
  return cat("residual + LayerNorm, N=", p.rows, " rows, C=", p.channels, ", fp32, inputs ", p.offset, " + N(0, ",
             p.spread, ")");
}

Tolerance tolerance(const LayerNormProblem& p, int64_t reduction_length) {
  return tolerance_for_offset(DType::F32, reduction_length, std::fabs(p.offset) / p.spread);
}

KernelLab forward_lab(const LayerNormProblem& p) {
  const double NC = static_cast<double>(p.rows) * static_cast<double>(p.channels);
  // Read a and b, write residual and out; mean, rstd, weight and bias are small. FLOPs per element: the add,
  // the mean's add, the variance's subtract and multiply-add, the output's subtract, two multiplies and add.
  KernelLab lab("layernorm_forward", problem_text(p),
                {.flops = 9.0 * NC, .bytes = 16.0 * NC + 8.0 * static_cast<double>(p.rows + p.channels)});
  Rng rng(p.seed);
  const ForwardTensors in = random_forward_tensors(p, rng);
  ForwardTensors expected = forward_tensors_on(in, Device::cpu());
  reference_forward(expected);
  ForwardLab fl{lab, in, expected, tolerance(p, p.channels)};

#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const Device gpu = Device::cuda(0);
    fl.add("one thread per row", "the CPU loop as a kernel (after the core's residual kernel): uncoalesced", gpu,
           [](const ForwardTensors& t) {
             ops::cuda::residual_forward(t.residual, t.a, t.b);
             layernorm_lab::forward_v1(t.out, t.mean, t.rstd, t.residual, t.weight, t.bias);
           });
    fl.add("one warp per row", "the core's kernel: lanes stride the row (coalesced), shuffles for the sums", gpu,
           [](const ForwardTensors& t) {
             ops::cuda::residual_forward(t.residual, t.a, t.b);
             ops::cuda::layernorm_forward(t.out, t.mean, t.rstd, t.residual, t.weight, t.bias);
           });
    fl.add("row in registers, float4", "one 128-bit load per 4 elements, the row read once for three passes", gpu,
           [](const ForwardTensors& t) {
             ops::cuda::residual_forward(t.residual, t.a, t.b);
             layernorm_lab::forward_v3(t.out, t.mean, t.rstd, t.residual, t.weight, t.bias);
           });
    fl.add("fused residual + LayerNorm", "the add in the same kernel: residual written once, never read back", gpu,
           fused_forward);
  }
#endif
  fl.add("CPU reference", "ops::cpu: a residual pass over memory, then the LayerNorm (3 passes per row)", Device::cpu(),
         reference_forward);
  fl.add("CPU fused", "one pass over memory: each row added, written and normalised while in L1", Device::cpu(),
         fused_forward);
  return lab;
}

KernelLab backward_lab(const LayerNormProblem& p) {
  const double NC = static_cast<double>(p.rows) * static_cast<double>(p.channels);
  // Read dout, residual and dresidual, read and write da and db; mean, rstd, weight, dweight and dbias are small.
  KernelLab lab("layernorm_backward", problem_text(p),
                {.flops = 18.0 * NC,
                 .bytes = 28.0 * NC + 8.0 * static_cast<double>(p.rows) + 20.0 * static_cast<double>(p.channels)});
  Rng rng(p.seed);
  const Shape shape{p.rows, p.channels};
  // The forward's residual, mean and rstd, from the CPU reference.
  const ForwardTensors fwd = random_forward_tensors(p, rng);
  reference_forward(fwd);
  BackwardTensors in{random_tensor(shape, rng, 0.0f, 1.0f),
                     random_tensor(shape, rng, 0.0f, 1.0f),
                     fwd.residual,
                     fwd.weight,
                     fwd.mean,
                     fwd.rstd,
                     random_tensor(shape, rng, 0.0f, 1.0f),
                     random_tensor(shape, rng, 0.0f, 1.0f),
                     random_tensor({p.channels}, rng, 0.0f, 1.0f),
                     random_tensor({p.channels}, rng, 0.0f, 1.0f),
                     Tensor()};
  BackwardTensors expected = backward_tensors_on(in, Device::cpu());
  reference_backward(expected);
  BackwardLab bl{lab, in, expected, tolerance(p, std::max(p.rows, p.channels))};

#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const Device gpu = Device::cuda(0);
    bl.add("one thread per row", "dx by a thread per row; dweight/dbias by a thread per column over all rows", gpu,
           [](const BackwardTensors& t) {
             layernorm_lab::backward_v1(t.dresidual_total, t.dweight, t.dbias, t.dout, t.residual, t.weight, t.mean,
                                        t.rstd);
             ops::cuda::residual_backward(t.da, t.db, t.dresidual_total);
           });
    bl.add("one warp per row", "the core's: dx by a warp per row, column sums over the whole GPU (3 kernels)", gpu,
           [](const BackwardTensors& t) {
             ops::cuda::layernorm_backward(t.dresidual_total, t.dweight, t.dbias, t.dout, t.residual, t.weight, t.mean,
                                           t.rstd, ops::GradWrite::Add, ops::GradWrite::Add);
             ops::cuda::residual_backward(t.da, t.db, t.dresidual_total);
           });
    bl.add("row in registers, float4", "dweight/dbias summed inside the dx kernel: dout and x read once", gpu,
           [](const BackwardTensors& t) {
             layernorm_lab::backward_v3(t.dresidual_total, t.dweight, t.dbias, t.dout, t.residual, t.weight, t.mean,
                                        t.rstd);
             ops::cuda::residual_backward(t.da, t.db, t.dresidual_total);
           });
    bl.add("fused residual + LayerNorm", "dresidual + dx straight into da and db: no gradient of residual stored", gpu,
           fused_backward);
  }
#endif
  bl.add("CPU reference", "ops::cpu: dx into the gradient of residual, column sums re-reading dout and x, residual",
         Device::cpu(), reference_backward);
  bl.add("CPU fused", "one pass: dx into da and db, dweight/dbias into per-chunk sums", Device::cpu(), fused_backward);
  return lab;
}

}  // namespace

KernelLab make_layernorm_lab(const LayerNormProblem& problem, LabPass pass) {
  LAB_CHECK(problem.rows > 0 && problem.channels > 0 && problem.spread > 0, InvalidArgument,
            "layernorm lab: rows, channels and spread must be positive");
  return pass == LabPass::Forward ? forward_lab(problem) : backward_lab(problem);
}

}  // namespace lab::ch06
