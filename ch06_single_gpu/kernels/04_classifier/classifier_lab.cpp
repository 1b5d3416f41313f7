// The classifier lab's versions and their validation (see classifier_lab.h).
//
// Validation: the version's logits are reset to the inputs, its losses (and its probabilities buffer, for the
// versions that have one) filled with NaN, and after one run the losses and the gradient left in the logits are
// compared with the CPU reference's. Versions on one device share their working tensors (they run one after
// another), so the lab holds two copies of the logits per device, not one per version. The op works in place:
// each timed repeat runs on the gradient the previous one left (the work does not depend on the values).
#include "ch06_single_gpu/kernels/04_classifier/classifier_lab.h"

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/kernels/04_classifier/classifier_versions.h"
#include "common/lab/compare.h"
#include "common/ops/classifier.h"
#include "common/util/rng.h"

namespace lab::ch06 {

namespace {

using kernel_lab::Check;
using kernel_lab::KernelLab;
using kernel_lab::Version;

// What every version reads and writes. `probs` is the materialising versions' buffer.
struct ClassifierTensors {
  Tensor logits, losses, targets, probs;
};
using ClassifierFn = std::function<void(const ClassifierTensors&, int64_t vocab, float dloss)>;

ClassifierTensors working_tensors(const ClassifierTensors& inputs, Device device) {
  const int64_t N = inputs.logits.dim(0);
  return {inputs.logits.to(device), Tensor::empty({N}, DType::F32, device), inputs.targets.to(device),
          Tensor::empty(inputs.logits.shape(), DType::F32, device)};
}

// Random logits (see ClassifierProblem) and targets; rows 0 and 1 aim at the last and the first real column.
ClassifierTensors random_inputs(const ClassifierProblem& p) {
  Rng rng(p.seed);
  std::vector<float> logits(static_cast<size_t>(p.rows * p.padded_vocab));
  for (int64_t n = 0; n < p.rows; ++n)
    for (int64_t v = 0; v < p.padded_vocab; ++v)
      logits[static_cast<size_t>(n * p.padded_vocab + v)] =
          v < p.vocab ? rng.normal(p.offset, p.spread) : p.offset + 30.0f * p.spread;
  std::vector<int32_t> targets(static_cast<size_t>(p.rows));
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(p.vocab)));
  if (p.rows > 0) targets[0] = static_cast<int32_t>(p.vocab - 1);
  if (p.rows > 1) targets[1] = 0;
  return {Tensor::from_floats(logits, {p.rows, p.padded_vocab}).to_dtype(p.dtype), Tensor::empty({p.rows}, DType::F32),
          Tensor::from_ints(targets, {p.rows}), Tensor()};
}

struct ClassifierLab {
  KernelLab& lab;
  const ClassifierProblem& problem;
  ClassifierTensors inputs;    // on the CPU
  ClassifierTensors expected;  // the CPU reference's losses, and its gradient in `logits`
  float dloss = 0.0f;
  Tolerance loss_tol, grad_tol;

  // `any_dtype`: the version reads 16-bit logits too; the others are left out unless the logits are f32.
  void add(std::string name, std::string what_changes, const ClassifierTensors& t, ClassifierFn fn,
           bool any_dtype = false) {
    Version v;
    v.name = std::move(name);
    v.what_changes = std::move(what_changes);
    v.device = t.logits.device();
    if (!any_dtype && problem.dtype != DType::F32) v.left_out = "f32 logits only (--dtype f32)";
    const int64_t vocab = problem.vocab;
    const float d = dloss;
    v.run = [t, fn, vocab, d] { fn(t, vocab, d); };
    v.validate = [t, fn, vocab, d, in = inputs, e = expected, loss_tol = loss_tol, grad_tol = grad_tol] {
      t.logits.copy_from(in.logits);
      t.losses.fill_(NAN);
      t.probs.fill_(NAN);
      fn(t, vocab, d);
      return std::vector<Check>{Check::close("losses", t.losses, e.losses, loss_tol),
                                Check::close("dlogits", t.logits, e.logits, grad_tol)};
    };
    lab.add(std::move(v));
  }
};

std::string problem_text(const ClassifierProblem& p) {
  return cat("N=", p.rows, " rows, V=", p.vocab, " (padded ", p.padded_vocab, "), ", dtype_name(p.dtype), " logits ",
             p.offset, " + N(0, ", p.spread, ")");
}

// ---------------------------------------------------------------- the versions' calls

// The materialising versions, with their probabilities buffer.
template <void (*kVersion)(const Tensor&, const Tensor&, const Tensor&, int64_t, float, const Tensor&)>
void materialising(const ClassifierTensors& t, int64_t vocab, float dloss) {
  kVersion(t.logits, t.losses, t.targets, vocab, dloss, t.probs);
}
void core_fused(const ClassifierTensors& t, int64_t vocab, float dloss) {
  ops::fused_classifier(t.logits, t.losses, t.targets, vocab, dloss);
}
#ifdef LAB_WITH_CUDA
void registers_fused(const ClassifierTensors& t, int64_t vocab, float dloss) {
  ch06::cuda::fused_classifier_registers(t.logits, t.losses, t.targets, vocab, dloss);
}
void promoted_fused(const ClassifierTensors& t, int64_t vocab, float dloss) {
  ch06::fused_classifier(t.logits, t.losses, t.targets, vocab, dloss);
}
#endif

}  // namespace

KernelLab make_classifier_lab(const ClassifierProblem& p) {
  LAB_CHECK(p.rows > 0 && p.vocab > 0 && p.vocab <= p.padded_vocab && p.spread > 0, InvalidArgument,
            "classifier lab: rows, vocab and spread must be positive and vocab <= padded vocab");
  LAB_CHECK(p.dtype == DType::F32 || p.dtype == DType::BF16 || p.dtype == DType::F16, InvalidArgument,
            "classifier lab: the logits must be f32, bf16 or f16, not ", dtype_name(p.dtype));
  const double NV = static_cast<double>(p.rows) * static_cast<double>(p.padded_vocab);
  // The least any version must move: the logits read once and the gradient written once, in the logits' dtype
  // (targets and losses are 8 bytes a row). FLOPs per real logit: the maximum's compare, the sum's subtract, exp and
  // add, the gradient's subtract, exp and multiply (an exp counted as one).
  KernelLab lab("classifier", problem_text(p),
                {.flops = 7.0 * static_cast<double>(p.rows) * static_cast<double>(p.vocab),
                 .bytes = 2.0 * static_cast<double>(dtype_size(p.dtype)) * NV + 8.0 * static_cast<double>(p.rows)});
  const ClassifierTensors inputs = random_inputs(p);
  const float dloss = 1.0f / static_cast<float>(p.rows);
  // The reference in f32 on the logits' own values (16-bit logits widen exactly).
  ClassifierTensors expected{inputs.logits.to_dtype(DType::F32), Tensor::empty({p.rows}, DType::F32), inputs.targets,
                             Tensor()};
  ops::cpu::fused_classifier(expected.logits, expected.losses, expected.targets, p.vocab, dloss);
  // Losses: log(sum) + max - logit, rounded at the logits' magnitude (the offset). Gradient: each element
  // relative to itself, with the rounding of a V-term sum (most elements are ~dloss / V, far below the largest,
  // so a tolerance scaled by the largest would let them be anything); elements below the rounding of one
  // float of the largest are judged in absolute terms.
  const Tolerance loss_tol = tolerance_for_offset(DType::F32, p.vocab, std::fabs(p.offset) / p.spread);
  // A 16-bit gradient is rounded once more: within one of its ulps, 2^-7 (bf16) or 2^-10 (f16) of itself.
  const double rounding = p.dtype == DType::F32 ? 0.0 : dtype_epsilon(p.dtype);
  const Tolerance grad_tol{tolerance_for(DType::F32, p.vocab).rel + rounding, tolerance_for(DType::F32, 1).abs};
  ClassifierLab cl{lab, p, inputs, expected, dloss, loss_tol, grad_tol};

#ifdef LAB_WITH_CUDA
  if (cuda_available()) {
    const ClassifierTensors gpu = working_tensors(inputs, Device::cuda(0));
    cl.add("three-pass softmax, materialised",
           "the textbook: max, sum, normalise into probs; then cross-entropy and backward kernels read them", gpu,
           materialising<classifier::gpu_three_pass>);
    cl.add("online softmax, materialised", "max and sum in one pass: the softmax reads each row twice, not 3x", gpu,
           materialising<classifier::gpu_online>);
    cl.add("fused, three passes (the core's)", "one kernel; the gradient recomputes exp: no probs in memory", gpu,
           core_fused, true);
    cl.add("fused, online, float4", "v3 with v2's online pass and 128-bit loads: 2 reads of a row", gpu,
           [](const ClassifierTensors& t, int64_t vocab, float dloss) {
             classifier::gpu_fused_float4(t.logits, t.losses, t.targets, vocab, dloss);
           });
    cl.add("fused, online, row in registers",
           "v4 with 1024 threads a row, each keeping its 16-byte pieces in registers between the passes", gpu,
           registers_fused, true);
    cl.add("fused, online, row in shared memory (promoted)",
           "v5 with 512 threads keeping the pieces in shared memory: two rows an SM where a row fits 112 KiB", gpu,
           promoted_fused, true);
  }
#endif
  const ClassifierTensors cpu = working_tensors(inputs, Device::cpu());
  cl.add("CPU three-pass, materialised", "loops: max, exp and sum into probs, scale; cross-entropy; backward", cpu,
         materialising<classifier::cpu_three_pass>);
  cl.add("CPU online, materialised", "max and sum in one pass over L1-sized chunks, then probs; same two loops", cpu,
         materialising<classifier::cpu_online>);
  cl.add("CPU fused, three passes (reference)", "ops::cpu (and the promoted op's CPU path): no probs stored", cpu,
         core_fused, true);
  cl.add("CPU fused, online", "the chunked online pass, then the gradient: the row read twice, not 3x", cpu,
         [](const ClassifierTensors& t, int64_t vocab, float dloss) {
           classifier::cpu_fused_online(t.logits, t.losses, t.targets, vocab, dloss);
         });
  return lab;
}

}  // namespace lab::ch06
