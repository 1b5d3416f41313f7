// The attention lab's versions and their validation (see attention_lab.h).
#include "ch09_advanced/kernels/01_attention/attention_lab.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/core/device.h"
#include "common/core/error.h"
#include "common/lab/compare.h"
#include "common/ops/attention.h"
#include "common/ops/batched_attention.h"
#include "common/ops/flash_attention.h"
#include "common/util/rng.h"

#ifdef LAB_WITH_CUDA
#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#endif

namespace lab::ch09 {

namespace {

using kernel_lab::Check;
using kernel_lab::KernelLab;
using kernel_lab::Version;

// A reference computed on first use and kept: the fp64 references are the slowest part of a lab's start, and
// the 16-bit ones are needed only when a GPU version is validated.
class LazyTensor {
 public:
  explicit LazyTensor(std::function<Tensor()> make) : state_(std::make_shared<State>(State{std::move(make), {}})) {}
  const Tensor& get() const {
    if (!state_->value.defined()) state_->value = state_->make();
    return state_->value;
  }

 private:
  struct State {
    std::function<Tensor()> make;
    Tensor value;
  };
  std::shared_ptr<State> state_;
};

Tensor random_tensor(const Shape& shape, Rng& rng) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = rng.normal();
  return Tensor::from_floats(values, shape);
}

// A tensor of NaN with t's shape, dtype and device.
Tensor nan_like(const Tensor& t) {
  Tensor nan = poisoned(t.shape(), Device::cpu());
  if (t.dtype() != DType::F32) nan = nan.to_dtype(t.dtype());
  return nan.to(t.device());
}

// Materialized: the core's attention op (f32; v1, v3). Batched: the core's 16-bit materialised op (v8). Flash: the
// core's op (on CUDA, v7). FlashOnePass: the core's op with its one-pass backward (ops::FlashBackward::OnePass: on
// the CPU v10; on CUDA v9, dQ by atomics on the core's register kernels). FlashWmma: the lab's WMMA kernels (v4).
// FlashAtomicDq: the core's flash forward, and the lab's one-pass backward with dQ by atomics on v4's WMMA
// products (v5). FlashRegisters: the lab's copy of the core's kernels before they overlapped their loads (v6).
// FlashWideStrips: the core's op with its forward on 128-query tiles, two strips of queries a warp
// (ops::FlashTiles::Rows128), and its default backward (v11). FlashWideKeyStrips: v11's forward, and the core's
// backward on 128-row tiles, two strips of rows a warp (Rows128: v12). FlashWideShortSteps: v12 with its dK/dV
// kernel in steps of 16 queries (Rows128Steps16: v13). FlashWgmma: the lab's forward on Hopper's warpgroup
// products, and the core's backward (v14); FlashWgmmaOverlapped: the same with each tile's softmax beside the
// previous tile's products (v15).
enum class Algorithm {
  Materialized,
  Batched,
  Flash,
  FlashOnePass,
  FlashWmma,
  FlashAtomicDq,
  FlashRegisters,
  FlashWideStrips,
  FlashWideKeyStrips,
  FlashWideShortSteps,
  FlashWgmma,
  FlashWgmmaOverlapped
};

// The materialised algorithms keep the T x T probabilities for the backward; the flash ones the row log-sum-exp.
bool keeps_probabilities(Algorithm algorithm) {
  return algorithm == Algorithm::Materialized || algorithm == Algorithm::Batched;
}

// One version's tensors, on its device and in its dtype: the inputs, what the forward writes (the probabilities
// of the materialised algorithm, the log-sum-exp of the flash one) and the gradient.
struct VersionTensors {
  Tensor qkv, dout, out, saved, dqkv;
};

void run_forward(const VersionTensors& t, Algorithm algorithm, int n_head) {
  switch (algorithm) {
    case Algorithm::Materialized: return ops::attention_forward(t.out, t.saved, t.qkv, n_head);
    case Algorithm::Batched: return ops::batched_attention_forward(t.out, t.saved, t.qkv, n_head);
    case Algorithm::Flash:
    case Algorithm::FlashOnePass:
    case Algorithm::FlashAtomicDq: return ops::flash_attention_forward(t.out, t.saved, t.qkv, n_head);
    case Algorithm::FlashWideStrips:
    case Algorithm::FlashWideKeyStrips:
    case Algorithm::FlashWideShortSteps:
      return ops::flash_attention_forward(t.out, t.saved, t.qkv, n_head, ops::FlashTiles::Rows128);
#ifdef LAB_WITH_CUDA
    case Algorithm::FlashWmma: return attention_lab::flash_wmma_forward(t.out, t.saved, t.qkv, n_head);
    case Algorithm::FlashRegisters: return attention_lab::flash_registers_forward(t.out, t.saved, t.qkv, n_head);
    case Algorithm::FlashWgmma: return attention_lab::flash_wgmma_forward(t.out, t.saved, t.qkv, n_head);
    case Algorithm::FlashWgmmaOverlapped:
      return attention_lab::flash_wgmma_overlapped_forward(t.out, t.saved, t.qkv, n_head);
#else
    case Algorithm::FlashWmma:
    case Algorithm::FlashRegisters:
    case Algorithm::FlashWgmma:
    case Algorithm::FlashWgmmaOverlapped:
      fail(ErrorKind::Unsupported, "the lab's own flash kernels need the CUDA backend");
#endif
  }
}

void run_backward(const VersionTensors& t, Algorithm algorithm, int n_head) {
  switch (algorithm) {
    case Algorithm::Materialized: return ops::attention_backward(t.dqkv, t.dout, t.qkv, t.saved, n_head);
    case Algorithm::Batched: return ops::batched_attention_backward(t.dqkv, t.dout, t.qkv, t.saved, n_head);
    case Algorithm::Flash:
    case Algorithm::FlashWideStrips:
    case Algorithm::FlashWgmma:
    case Algorithm::FlashWgmmaOverlapped:
      return ops::flash_attention_backward(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head);
    case Algorithm::FlashOnePass:
      return ops::flash_attention_backward(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head, ops::GradWrite::Add,
                                           ops::FlashBackward::OnePass);
    case Algorithm::FlashWideKeyStrips:
      return ops::flash_attention_backward(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head, ops::GradWrite::Add,
                                           ops::FlashBackward::TwoPasses, ops::FlashTiles::Rows128);
    case Algorithm::FlashWideShortSteps:
      return ops::flash_attention_backward(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head, ops::GradWrite::Add,
                                           ops::FlashBackward::TwoPasses, ops::FlashTiles::Rows128Steps16);
#ifdef LAB_WITH_CUDA
    case Algorithm::FlashWmma: return attention_lab::flash_wmma_backward(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head);
    case Algorithm::FlashAtomicDq:
      return attention_lab::flash_backward_atomic_dq(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head);
    case Algorithm::FlashRegisters:
      return attention_lab::flash_registers_backward(t.dqkv, t.dout, t.qkv, t.out, t.saved, n_head);
#else
    case Algorithm::FlashWmma:
    case Algorithm::FlashAtomicDq:
    case Algorithm::FlashRegisters: fail(ErrorKind::Unsupported, "the lab's own flash kernels need the CUDA backend");
#endif
  }
}

// The references of one input precision: the exact result of the inputs as that precision stores them, and, for
// 16 bits, the straightforward same-precision computation.
struct References {
  LazyTensor exact_out, exact_lse, exact_dqkv;
  LazyTensor baseline_out, baseline_dqkv;  // 16-bit only
};

References references_for(const AttentionShape& s, const Tensor& qkv, const Tensor& dout, DType dtype) {
  const auto rounded = [dtype](const Tensor& t) {
    return dtype == DType::F32 ? t : t.to_dtype(dtype).to_dtype(DType::F32);
  };
  const Tensor q = rounded(qkv), g = rounded(dout);
  const auto exact = std::make_shared<ReferenceForward>();  // out and lse come from one reference run
  const auto exact_forward = [=] {
    if (!exact->out.defined()) *exact = reference_forward(s, q);
    return *exact;
  };
  return {LazyTensor([=] { return exact_forward().out; }), LazyTensor([=] { return exact_forward().lse; }),
          LazyTensor([=] { return reference_backward(s, q, g); }),
          LazyTensor([=] { return reference_forward(s, q, dtype).out; }),
          LazyTensor([=] { return reference_backward(s, q, g, dtype); })};
}

bench::Precision precision_of(DType dtype) {
  return dtype == DType::BF16  ? bench::Precision::BF16
         : dtype == DType::F16 ? bench::Precision::FP16
                               : bench::Precision::FP32;
}

struct AttentionLab {
  KernelLab& lab;
  AttentionShape shape;
  LabPass pass;
  Tensor qkv, dout;  // f32, on the CPU
  References f32_refs, narrow_refs;
  Tolerance tol;

  // A version that cannot run here (a GPU version on a machine without one): it keeps its number and its line.
  void add_left_out(std::string name, std::string what_changes, DType dtype, Device device, std::string why) {
    Version v;
    v.name = std::move(name);
    v.what_changes = std::move(what_changes);
    v.device = device;
    v.precision = precision_of(dtype);
    v.left_out = std::move(why);
    // Never called for a version left out; the harness wants both.
    v.run = [] { fail(ErrorKind::Unsupported, "attention lab: a version left out was run"); };
    v.validate = []() -> std::vector<Check> {
      fail(ErrorKind::Unsupported, "attention lab: a version left out was run");
    };
    lab.add(std::move(v));
  }

  void add(std::string name, std::string what_changes, Algorithm algorithm, DType dtype, Device device) {
    const auto convert = [&](const Tensor& t) { return (dtype == DType::F32 ? t : t.to_dtype(dtype)).to(device); };
    const AttentionShape s = shape;
    // The probabilities in the version's dtype (f32 for v1 and v3, 16 bits for v8); the log-sum-exp in f32.
    VersionTensors t{convert(qkv), convert(dout), Tensor::empty({s.B, s.T, s.C()}, dtype, device),
                     keeps_probabilities(algorithm) ? Tensor::empty({s.B, s.NH, s.T, s.T}, dtype, device)
                                                    : Tensor::empty({s.B, s.NH, s.T}, DType::F32, device),
                     Tensor::zeros({s.B, s.T, 3 * s.C()}, dtype, device)};
    const int n_head = static_cast<int>(s.NH);
    const References refs = dtype == DType::F32 ? f32_refs : narrow_refs;
    const Tolerance f32_tol = tol;
    // A check of `actual` against the exact result, or by the low-precision rule against the baseline too.
    const auto judge = [dtype, f32_tol](const char* what, const Tensor& actual, const LazyTensor& exact,
                                        const LazyTensor& baseline) {
      if (dtype == DType::F32) return Check::close(what, actual, exact.get(), f32_tol);
      return Check::low_precision(what, actual, baseline.get(), exact.get(), dtype);
    };
    Version v;
    v.name = std::move(name);
    v.what_changes = std::move(what_changes);
    v.device = device;
    v.precision = precision_of(dtype);
    if (pass == LabPass::Forward) {
      v.run = [t, algorithm, n_head] { run_forward(t, algorithm, n_head); };
      v.validate = [t, algorithm, n_head, refs, judge, f32_tol] {
        t.out.copy_from(nan_like(t.out));
        t.saved.copy_from(nan_like(t.saved));
        run_forward(t, algorithm, n_head);
        std::vector<Check> checks{judge("out", t.out, refs.exact_out, refs.baseline_out)};
        // The log-sum-exp is f32 from f32 sums of exact 16-bit products: judged as f32 in every version.
        if (!keeps_probabilities(algorithm))
          checks.push_back(Check::close("lse", t.saved, refs.exact_lse.get(), f32_tol));
        return checks;
      };
    } else {
      run_forward(t, algorithm, n_head);  // what this version's backward reads
      v.run = [t, algorithm, n_head] { run_backward(t, algorithm, n_head); };
      v.validate = [t, algorithm, n_head, refs, judge] {
        t.dqkv.zero_();
        run_backward(t, algorithm, n_head);
        return std::vector<Check>{judge("dqkv", t.dqkv, refs.exact_dqkv, refs.baseline_dqkv)};
      };
    }
    lab.add(std::move(v));
  }
};

std::string problem_text(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  return cat("causal attention ", "B=", s.B, " T=", s.T, " NH=", s.NH, " HS=", s.HS, ", f32 (CUDA flash and batched ",
             dtype_name(p.flash_dtype), "), FLOPs of the causal half");
}

}  // namespace

kernel_lab::Cost attention_cost(const AttentionShape& s, LabPass pass) {
  const double B = static_cast<double>(s.B), T = static_cast<double>(s.T), NH = static_cast<double>(s.NH);
  const double HS = static_cast<double>(s.HS), BTC = B * T * NH * HS, rows = B * NH * T;
  const double forward_flops = 4.0 * B * NH * T * T * HS / 2.0;
  if (pass == LabPass::Forward) return {forward_flops, 2.0 * (3.0 * BTC + BTC) + 4.0 * rows};
  return {2.5 * forward_flops, 2.0 * (3.0 * BTC + BTC + BTC + 6.0 * BTC) + 8.0 * rows};
}

KernelLab make_attention_lab(const AttentionProblem& p, LabPass pass) {
  const AttentionShape& s = p.shape;
  LAB_CHECK(s.B > 0 && s.T > 0 && s.NH > 0 && s.HS > 0, InvalidArgument,
            "attention lab: batch, sequence, heads and head size must be positive");
  LAB_CHECK(p.flash_dtype == DType::BF16 || p.flash_dtype == DType::F16, InvalidArgument,
            "attention lab: the flash version runs in bf16 or f16, not ", dtype_name(p.flash_dtype));
  KernelLab lab(pass == LabPass::Forward ? "attention_forward" : "attention_backward", problem_text(p),
                attention_cost(s, pass));
  Rng rng(p.seed);
  const Tensor qkv = random_tensor({s.B, s.T, 3 * s.C()}, rng), dout = random_tensor({s.B, s.T, s.C()}, rng);
  AttentionLab al{lab,
                  s,
                  pass,
                  qkv,
                  dout,
                  references_for(s, qkv, dout, DType::F32),
                  references_for(s, qkv, dout, p.flash_dtype),
                  tolerance_for(DType::F32, std::max(s.T, s.HS))};

  al.add("CPU reference", "ops::cpu::attention: T x T scores by sgemm per head, softmax rows, sgemm; kept for backward",
         Algorithm::Materialized, DType::F32, Device::cpu());
  al.add("CPU flash", "64 x 64 tiles, online softmax: no T x T buffer, masked tiles skipped", Algorithm::Flash,
         DType::F32, Device::cpu());

  // The GPU versions, v3 to v9 (and v11 to v13, after v10): left out, with their numbers kept, where no GPU is
  // visible.
  struct GpuVersion {
    const char* name;
    std::string what_changes;
    Algorithm algorithm;
    bool f32;
  };
  const bool backward = pass == LabPass::Backward;
  const GpuVersion gpu_versions[] = {
      {"CUDA materialised", "the core's op: batched cuBLAS sgemms (fp32) around a softmax kernel, T x T in memory",
       Algorithm::Materialized, true},
      {"CUDA flash, WMMA", "a block per query tile, K/V tiles in shared memory, WMMA products through shared memory",
       Algorithm::FlashWmma, false},
      // In the forward lab v5 is the core's forward (v7) under v5's name, so that a version has one number in both.
      {"CUDA flash, dQ by atomics",
       backward ? "one pass over key tiles, dS K added into f32 dQ: 5 tile products, not 7"
                : "a backward version: its forward is v7's",
       Algorithm::FlashAtomicDq, false},
      {"CUDA flash, fragments in registers (FA2)",
       "mma.sync with known lane layouts: scores, softmax and outputs in registers; tiles loaded, then multiplied",
       Algorithm::FlashRegisters, false},
      {"CUDA flash, loads overlapped",
       "the core's op: v6 with the next tile copied by cp.async during this one, the mask on the diagonal only",
       Algorithm::Flash, false},
      // After the flash versions, so that their numbers stay theirs: the rung between v3 and flash in the trainer.
      {"CUDA batched, 16-bit",
       "the --attention batched rung: v3's algorithm with 16-bit cuBLASLt products (tensor cores) and one fused "
       "causal softmax; T x T kept in 16 bits",
       Algorithm::Batched, false},
      // Like v5 in the forward lab: v7's forward under v9's name.
      {"CUDA flash, one pass with dQ by atomics, fragments in registers",
       backward ? "the core's --attention flash-one-pass: v5's one pass on v7's kernels, dS K by mma.sync, atomicAdd "
                  "into f32 dQ"
                : "a backward version: its forward is v7's",
       Algorithm::FlashOnePass, false},
  };
  bool gpu = false;
#ifdef LAB_WITH_CUDA
  gpu = cuda_available();
#endif
  const auto add_gpu = [&](const GpuVersion& v) {
    const DType dtype = v.f32 ? DType::F32 : p.flash_dtype;
    if (gpu)
      al.add(v.name, v.what_changes, v.algorithm, dtype, Device::cuda(0));
    else
      al.add_left_out(v.name, v.what_changes, dtype, Device::cuda(0),
                      "no CUDA GPU here (a CUDA build on a machine with one)");
  };
  for (const GpuVersion& v : gpu_versions) add_gpu(v);

  // Like v5 in the forward lab: v2's forward under v10's name.
  al.add("CPU flash, one pass",
         backward ? "v2 with dQ summed in the pass over key tiles: one task per head, S and dP computed once, not twice"
                  : "a backward version: its forward is v2's",
         Algorithm::FlashOnePass, DType::F32, Device::cpu());

  // A forward version: in the backward lab v7's backward under v11's name.
  add_gpu({"CUDA flash, 128-query tiles",
           backward ? "a forward version: its backward is v7's"
                    : "v7's forward kernel with 2 strips of 16 queries a warp: each K/V fragment feeds both (head size "
                      "64; 128 keeps v7's one strip)",
           Algorithm::FlashWideStrips, false});
  // A backward version: in the forward lab v11's forward under v12's name.
  add_gpu({"CUDA flash, 128-row tiles in the backward",
           backward ? "v7's backward kernels with 2 strips of 16 rows a warp: each Q/dO fragment feeds both strips of "
                      "keys (dK, dV), each K/V fragment both strips of queries (dQ); head size 64 (128 keeps one strip)"
                    : "a backward version: its forward is v11's",
           Algorithm::FlashWideKeyStrips, false});
  add_gpu({"CUDA flash, 128-row tiles in the backward, steps of 16 queries",
           backward ? "v12 with its dK/dV kernel in steps of 16 queries, not 32: 244 registers a thread, not 255, the "
                      "warp's K and V fragments read twice as often (head size 64; at 128 v12 itself)"
                    : "a backward version: its forward is v11's",
           Algorithm::FlashWideShortSteps, false});
  // Forward versions: in the backward lab v7's backward under v14's and v15's names. Hopper only.
  const GpuVersion wgmma_versions[] = {
      {"CUDA flash, wgmma (Hopper)",
       backward
           ? "a forward version: its backward is v7's"
           : "v7's forward with its products on warpgroup wgmma (sm_90a): Q, K and V read by the tensor cores from "
             "shared memory, P from registers",
       Algorithm::FlashWgmma, false},
      {"CUDA flash, wgmma, softmax overlapped (Hopper)",
       backward ? "a forward version: its backward is v7's"
                : "v14 with each tile's S = Q K^T queued with the previous tile's P V, and its softmax computed while "
                  "the tensor cores still run that P V",
       Algorithm::FlashWgmmaOverlapped, false},
  };
  bool wgmma_here = false;
#ifdef LAB_WITH_CUDA
  wgmma_here = gpu && attention_lab::flash_wgmma_runs_here();
#endif
  for (const GpuVersion& v : wgmma_versions) {
    if (gpu && !wgmma_here)
      al.add_left_out(
          v.name, v.what_changes, p.flash_dtype, Device::cuda(0),
          "wgmma needs a compute capability 9.0 GPU and a build for sm_90a (90 among CMAKE_CUDA_ARCHITECTURES)");
    else
      add_gpu(v);
  }
  return lab;
}

}  // namespace lab::ch09
