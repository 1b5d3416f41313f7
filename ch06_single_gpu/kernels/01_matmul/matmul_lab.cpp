// The matmul lab's versions and their references (see matmul_lab.h).
//
// The references are computed on first use and shared by the versions that need them (a run of one version
// pays only for its own): the CPU reference GEMM and its epilogue; and, for the low-precision rule, fp64
// products and straightforward fp32-accumulating loops over the bf16 and the TF32 inputs.
#include "ch06_single_gpu/kernels/01_matmul/matmul_lab.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ch06_single_gpu/kernels/01_matmul/matmul_versions.h"
#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/core/device.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/gelu.h"
#include "common/util/rng.h"

namespace lab::ch06 {

namespace {

using bench::Precision;
using kernel_lab::Check;
using kernel_lab::KernelLab;
using kernel_lab::Version;

// ---------------------------------------------------------------- references

// A tensor computed on first use, then shared (copies of a LazyTensor share the one result).
class LazyTensor {
 public:
  LazyTensor() = default;
  explicit LazyTensor(std::function<Tensor()> make) : state_(std::make_shared<State>()) {
    state_->make = std::move(make);
  }
  const Tensor& get() const {
    std::call_once(state_->once, [this] { state_->value = state_->make(); });
    return state_->value;
  }

 private:
  struct State {
    std::function<Tensor()> make;
    std::once_flag once;
    Tensor value;
  };
  std::shared_ptr<State> state_;
};

// The textbook product of row-major a[M,K] and b[K,N] with accumulators of type Acc: element (i, j) is the sum
// over k in order, as the triple loop computes it (the loop runs i, k, j so that it vectorises over j).
template <typename Acc>
std::vector<Acc> textbook_gemm(const std::vector<float>& a, const std::vector<float>& b, int64_t M, int64_t N,
                               int64_t K) {
  std::vector<Acc> c(static_cast<size_t>(M * N), Acc(0));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    Acc* row = c.data() + i * N;
    for (int64_t k = 0; k < K; ++k) {
      const Acc aik = a[static_cast<size_t>(i * K + k)];
      const float* brow = b.data() + k * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) row[j] += aik * static_cast<Acc>(brow[j]);
    }
  }
  return c;
}

double gelu_f64(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// The fp64 product's epilogue in fp64, rounded once to f32.
Tensor exact_result(const std::vector<double>& product, const std::vector<float>& bias, Epilogue epilogue, int64_t M,
                    int64_t N) {
  std::vector<float> out(product.size());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double v = product[static_cast<size_t>(i * N + j)];
      if (epilogue != Epilogue::None) v += bias[static_cast<size_t>(j)];
      out[static_cast<size_t>(i * N + j)] = static_cast<float>(epilogue == Epilogue::BiasGelu ? gelu_f64(v) : v);
    }
  return Tensor::from_floats(out, {M, N});
}

// The fp32 product's epilogue in fp32: the bias added, then the CPU reference's GELU.
Tensor fp32_result(Tensor product, const std::vector<float>& bias, Epilogue epilogue) {
  const int64_t M = product.dim(0), N = product.dim(1);
  if (epilogue == Epilogue::None) return product;
  float* p = product.data<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) p[i * N + j] += bias[static_cast<size_t>(j)];
  if (epilogue == Epilogue::BiasGelu) ops::gelu_forward(product, product);
  return product;
}

// fp32 rounded to TF32 as tensor cores read it: 10 mantissa bits, to nearest, ties to even.
float round_to_tf32(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN as they are
  return std::bit_cast<float>((bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu);
}

double matmul_flops(const MatmulProblem& p) {
  return 2.0 * static_cast<double>(p.M) * static_cast<double>(p.N) * static_cast<double>(p.K);
}

// 19.33e9 -> "19.3", 1e9 -> "1".
std::string significant_gflop(double flops) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", flops / 1e9);
  return buf;
}

Tensor random_tensor(const Shape& shape, Rng& rng, float mean, float std) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = rng.normal(mean, std);
  return Tensor::from_floats(values, shape);
}

// ---------------------------------------------------------------- the lab

// What the versions share: the inputs on the CPU, an output, and the references, by epilogue (None, Bias,
// BiasGelu).
struct MatmulLabData {
  MatmulProblem p;
  Tensor a, b, bias;      // f32
  Tensor a_bf16, b_bf16;  // the inputs rounded to bf16
  Tensor out;             // f32 [M,N], for the CPU versions
  Tolerance fp32_tol;
  LazyTensor reference[3];                     // the CPU reference GEMM and its epilogue
  LazyTensor bf16_exact[3], bf16_baseline[3];  // for the bf16 versions
  LazyTensor tf32_exact, tf32_baseline;        // for TF32 (no epilogue)
};

size_t index_of(Epilogue e) {
  return e == Epilogue::None ? 0 : e == Epilogue::Bias ? 1 : 2;
}

std::shared_ptr<const MatmulLabData> make_data(const MatmulProblem& p) {
  auto d = std::make_shared<MatmulLabData>();
  const int64_t M = p.M, N = p.N, K = p.K;
  Rng rng(p.seed);
  d->p = p;
  d->a = random_tensor({M, K}, rng, p.offset, 1.0f);
  d->b = random_tensor({K, N}, rng, 0.0f, 1.0f / std::sqrt(static_cast<float>(K)));
  d->bias = random_tensor({N}, rng, 0.0f, 0.5f);
  d->a_bf16 = d->a.to_dtype(DType::BF16);
  d->b_bf16 = d->b.to_dtype(DType::BF16);
  d->out = Tensor::empty({M, N}, DType::F32);
  d->fp32_tol =
      p.offset != 0.0f ? tolerance_for_offset(DType::F32, K, std::abs(p.offset)) : tolerance_for(DType::F32, K);

  const std::vector<float> bias = d->bias.to_floats();
  const Tensor a = d->a, b = d->b, a16 = d->a_bf16, b16 = d->b_bf16;
  for (const Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::BiasGelu}) {
    const size_t i = index_of(e);
    d->reference[i] = LazyTensor([=] {
      Tensor c = Tensor::empty({M, N}, DType::F32);
      ops::cpu::sgemm(false, false, M, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N, 0.0f, c.data<float>(), N);
      return fp32_result(c, bias, e);
    });
    d->bf16_exact[i] = LazyTensor(
        [=] { return exact_result(textbook_gemm<double>(a16.to_floats(), b16.to_floats(), M, N, K), bias, e, M, N); });
    d->bf16_baseline[i] = LazyTensor([=] {
      const std::vector<float> c = textbook_gemm<float>(a16.to_floats(), b16.to_floats(), M, N, K);
      return fp32_result(Tensor::from_floats(c, {M, N}), bias, e);
    });
  }
  d->tf32_exact = LazyTensor([=] {
    return exact_result(textbook_gemm<double>(a.to_floats(), b.to_floats(), M, N, K), bias, Epilogue::None, M, N);
  });
  d->tf32_baseline = LazyTensor([=] {
    std::vector<float> at = a.to_floats(), bt = b.to_floats();
    for (std::vector<float>* v : {&at, &bt})
      for (float& x : *v) x = round_to_tf32(x);
    return Tensor::from_floats(textbook_gemm<float>(at, bt, M, N, K), {M, N});
  });
  return d;
}

// How a version's output is judged (see matmul_lab.h).
enum class Judge { Fp32, Bf16, Tf32 };

// cuBLASLt's GELU epilogue is an approximation of its own, documented by name only: on an H100 (CUDA 13.0) it
// differed from the tanh formula of the references by up to 3.7e-6 of the output's scale (1.0-1.2e-6 at the
// larger shapes). A version with GELU in the epilogue is allowed this much, relative to the output's scale,
// on top of its GEMM's rounding; the emulation build's stand-in approximates too (its README says how).
constexpr double kGeluEpilogueAllowance = 1e-5;

std::vector<Check> judge_output(const MatmulLabData& d, const Tensor& out, Judge judge, Epilogue epilogue,
                                double allowance) {
  const size_t e = index_of(epilogue);
  switch (judge) {
    case Judge::Fp32: {
      Tolerance tol = d.fp32_tol;
      tol.abs += allowance;
      return {Check::close("c", out, d.reference[e].get(), tol)};
    }
    case Judge::Bf16:
      return {
          Check::low_precision("c", out, d.bf16_baseline[e].get(), d.bf16_exact[e].get(), DType::F32, 4.0, allowance)};
    case Judge::Tf32: return {Check::low_precision("c", out, d.tf32_baseline.get(), d.tf32_exact.get(), DType::F32)};
  }
  return {};
}

struct VersionAdder {
  KernelLab& lab;
  std::shared_ptr<const MatmulLabData> data;

  // `run` computes into `out` (on `device`) from the lab's inputs; validate() fills out with NaN first.
  // `allowance`: kGeluEpilogueAllowance for a version whose GELU is cuBLASLt's epilogue, else 0.
  // `left_out`: why the version does not run at this size (empty: it runs).
  void add(std::string name, std::string what_changes, Device device, Precision precision, Judge judge,
           Epilogue epilogue, const Tensor& out, std::function<void()> run, double allowance = 0.0,
           std::string left_out = {}) const {
    Version v;
    v.name = std::move(name);
    v.left_out = std::move(left_out);
    v.what_changes = std::move(what_changes);
    v.device = device;
    v.precision = precision;
    v.run = run;
    v.validate = [run, out, judge, epilogue, allowance, d = data] {
      out.fill_(std::numeric_limits<float>::quiet_NaN());
      run();
      return judge_output(*d, out, judge, epilogue, allowance);
    };
    lab.add(std::move(v));
  }
};

constexpr Epilogue kNone = Epilogue::None, kBias = Epilogue::Bias, kBiasGelu = Epilogue::BiasGelu;

#ifdef LAB_WITH_CUDA
void add_gpu_versions(const VersionAdder& add, const MatmulLabData& d) {
  namespace mm = matmul;
  const Device gpu = Device::cuda(0);
  const Tensor a = d.a.to(gpu), b = d.b.to(gpu), bias = d.bias.to(gpu);
  const Tensor a16 = d.a_bf16.to(gpu), b16 = d.b_bf16.to(gpu);
  const Tensor c = Tensor::empty({d.p.M, d.p.N}, DType::F32, gpu);
  const Tensor none;
  add.add("naive", "one thread per element of C, A and B read from global memory for every product", gpu,
          Precision::FP32, Judge::Fp32, kNone, c, [=] { mm::gpu_naive(c, a, b); });
  add.add("shared-memory tiled", "32 x 32 tiles of A and B staged in shared memory: 32x fewer global loads", gpu,
          Precision::FP32, Judge::Fp32, kNone, c, [=] { mm::gpu_smem_tiled(c, a, b); });
  add.add("register blocked", "each thread an 8 x 8 micro-tile in registers: 4 FMAs per shared-memory load", gpu,
          Precision::FP32, Judge::Fp32, kNone, c, [=] { mm::gpu_register_blocked(c, a, b); });
  add.add("vectorised", "float4 global and shared loads, A's tile transposed: a quarter of the load instructions", gpu,
          Precision::FP32, Judge::Fp32, kNone, c, [=] { mm::gpu_vectorized(c, a, b); });
  add.add("tensor cores (WMMA, bf16)", "bf16 inputs, fp32 accumulation: 16 x 16 x 16 products on tensor cores", gpu,
          Precision::BF16, Judge::Bf16, kNone, c, [=] { mm::gpu_wmma_bf16(c, a16, b16); });
  add.add("cuBLAS sgemm", "the vendor library, strict fp32: the ceiling for fp32", gpu, Precision::FP32, Judge::Fp32,
          kNone, c, [=] { mm::gpu_cublas_sgemm(c, a, b, false); });
  add.add("cuBLAS sgemm, TF32", "inputs rounded to TF32 on the tensor cores, fp32 accumulation", gpu, Precision::TF32,
          Judge::Tf32, kNone, c, [=] { mm::gpu_cublas_sgemm(c, a, b, true); });
  add.add("cuBLASLt fp32 + bias", "the bias added in the GEMM's epilogue, not by a kernel of its own", gpu,
          Precision::FP32, Judge::Fp32, kBias, c, [=] { matmul_epilogue(c, none, a, b, false, bias, kBias); });
  add.add("cuBLASLt fp32 + bias, then GELU", "GELU unfused: a second kernel reads and writes C again", gpu,
          Precision::FP32, Judge::Fp32, kBiasGelu, c, [=] {
            matmul_epilogue(c, none, a, b, false, bias, kBias);
            ops::gelu_forward(c, c);
          });
  add.add(
      "cuBLASLt fp32 + bias + GELU", "GELU in the epilogue too: C written once, never read back", gpu, Precision::FP32,
      Judge::Fp32, kBiasGelu, c, [=] { matmul_epilogue(c, none, a, b, false, bias, kBiasGelu); },
      kGeluEpilogueAllowance);
  add.add("cuBLASLt bf16", "bf16 inputs on the tensor cores: the ceiling for bf16", gpu, Precision::BF16, Judge::Bf16,
          kNone, c, [=] { matmul_epilogue(c, none, a16, b16, false, none, kNone); });
  add.add("cuBLASLt bf16 + bias", "the bias in the epilogue", gpu, Precision::BF16, Judge::Bf16, kBias, c,
          [=] { matmul_epilogue(c, none, a16, b16, false, bias, kBias); });
  add.add(
      "cuBLASLt bf16 + bias + GELU", "bias and GELU in the epilogue", gpu, Precision::BF16, Judge::Bf16, kBiasGelu, c,
      [=] { matmul_epilogue(c, none, a16, b16, false, bias, kBiasGelu); }, kGeluEpilogueAllowance);
}
#endif

// The unfused CPU epilogue: the GEMM, then a pass adding the bias, then GELU's pass, each over all of C.
void cpu_unfused_bias_gelu(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& bias) {
  matmul::cpu_openblas(c, a, b);
  const int64_t M = c.dim(0), N = c.dim(1);
  float* p = c.data<float>();
  const float* bp = bias.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i)
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) p[i * N + j] += bp[j];
  ops::gelu_forward(c, c);
}

void add_cpu_versions(const VersionAdder& add, const MatmulLabData& d) {
  namespace mm = matmul;
  const Device cpu = Device::cpu();
  const Tensor a = d.a, b = d.b, a16 = d.a_bf16, b16 = d.b_bf16, c = d.out, bias = d.bias;
  // Left out above its budget, keeping its number: a run of it at the default shape takes 15 s to a minute.
  const std::string naive_left_out =
      runs_cpu_naive(d.p) ? std::string()
                          : cat(significant_gflop(matmul_flops(d.p)), " GFLOP a run, above the ",
                                significant_gflop(kCpuNaiveFlopBudget),
                                " GFLOP it runs at by default (at the default shape, 15 s to a minute a run on 2 "
                                "cores): --cpu-naive runs it, a smaller shape (--m 512 --n 768 --k 768) includes it");
  add.add(
      "CPU naive", "the textbook triple loop (k walks down a column of B)", cpu, Precision::FP32, Judge::Fp32, kNone, c,
      [=] { mm::cpu_naive(c, a, b); }, 0.0, naive_left_out);
  add.add("CPU blocked", "loops i, k, j: a contiguous, vectorised inner loop; blocks of B reused from L2", cpu,
          Precision::FP32, Judge::Fp32, kNone, c, [=] { mm::cpu_blocked(c, a, b); });
  add.add(ops::cpu::gemm_uses_blas() ? "CPU OpenBLAS sgemm" : "CPU reference sgemm (portable, no BLAS)",
          "packed panels, a register-blocked micro-kernel: the CPU ceiling", cpu, Precision::FP32, Judge::Fp32, kNone,
          c, [=] { mm::cpu_openblas(c, a, b); });
  if (mm::cpu_has_sbgemm())
    add.add("CPU OpenBLAS sbgemm (bf16)", "bf16 inputs, fp32 accumulation (AVX512-BF16 where the CPU has it)", cpu,
            Precision::BF16, Judge::Bf16, kNone, c, [=] { mm::cpu_sbgemm(c, a16, b16); });
  add.add("CPU sgemm, then bias and GELU passes", "unfused: three passes over C (the GEMM's, the bias's, GELU's)", cpu,
          Precision::FP32, Judge::Fp32, kBiasGelu, c, [=] { cpu_unfused_bias_gelu(c, a, b, bias); });
  add.add("CPU fused bias + GELU by row blocks", "each block's GEMM onto its bias, then its GELU while in cache", cpu,
          Precision::FP32, Judge::Fp32, kBiasGelu, c,
          [=] { matmul_epilogue(c, Tensor(), a, b, false, bias, kBiasGelu); });
}

}  // namespace

bool runs_cpu_naive(const MatmulProblem& p) {
  return p.cpu_naive_at_any_size || matmul_flops(p) <= kCpuNaiveFlopBudget;
}

KernelLab make_matmul_lab(const MatmulProblem& p) {
  LAB_CHECK(p.M > 0 && p.N > 0 && p.K > 0, InvalidArgument, "matmul lab: M, N and K must be positive (M = ", p.M,
            ", N = ", p.N, ", K = ", p.K, ")");
  const std::shared_ptr<const MatmulLabData> data = make_data(p);
  const double flops = matmul_flops(p);
  // The least traffic: A and B read once, C written once (fp32).
  const double bytes = 4.0 * static_cast<double>(p.M * p.K + p.K * p.N + p.M * p.N);
  KernelLab lab("matmul",
                cat("C[M,N] = A[M,K] @ B[K,N] (+ bias, GELU), M=", p.M, " N=", p.N, " K=", p.K,
                    p.offset != 0.0f ? cat(", A offset ", p.offset) : std::string()),
                {flops, bytes});
  const VersionAdder add{lab, data};
#ifdef LAB_WITH_CUDA
  if (cuda_available()) add_gpu_versions(add, *data);
#endif
  add_cpu_versions(add, *data);
  return lab;
}

}  // namespace lab::ch06
