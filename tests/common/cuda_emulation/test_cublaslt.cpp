// The cuBLASLt stand-in: matmuls against a triple loop (fp32 with transposes, bf16 and fp16 inputs,
// batches), the bias, GELU and aux epilogues, GELU's backward (DGELU) and the bias gradient (BGRADB), the heuristic,
// TF32 through the compute type, the bias's type and alignment rules, and the checks that return INVALID_VALUE or
// NOT_SUPPORTED. Also the fp16 and bf16 types of the stand-in headers.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Values exactly representable in fp16 and bf16 (multiples of 1/8 below 16), so every input type holds the
// same numbers and the reference is exact.
std::vector<float> representable(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> eighths(-64, 64);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(eighths(rng)) / 8.0f;
  return v;
}

template <typename T>
std::vector<T> convert(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Descriptors of one matmul, destroyed at the end of the scope.
struct Matmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  Matmul(cublasComputeType_t compute, cudaDataType_t ab_type, cudaDataType_t cd_type, bool ta, bool tb, int m, int n,
         int k) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    set(CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, ab_type, ta ? k : m, ta ? m : k, ta ? k : m), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, ab_type, tb ? n : k, tb ? k : n, tb ? n : k), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&c, cd_type, m, n, m), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&d, cd_type, m, n, m), CUBLAS_STATUS_SUCCESS);
  }
  ~Matmul() {
    cublasLtMatmulDescDestroy(desc);
    for (auto* layout : {a, b, c, d}) cublasLtMatrixLayoutDestroy(layout);
  }
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& value) {
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value), CUBLAS_STATUS_SUCCESS);
  }
  void batch(int count, int64_t sa, int64_t sb, int64_t scd) {
    const int64_t strides[] = {sa, sb, scd, scd};
    const cublasLtMatrixLayout_t layouts[] = {a, b, c, d};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                 sizeof strides[i]),
                CUBLAS_STATUS_SUCCESS);
    }
  }
};

class CublasLt : public EmulationTest {
 protected:
  void SetUp() override {
    EmulationTest::SetUp();
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cublasLtDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    EmulationTest::TearDown();
  }
  cublasStatus_t run(const Matmul& mm, float alpha, const void* A, const void* B, float beta, const void* C, void* D) {
    return cublasLtMatmul(handle_, mm.desc, &alpha, A, mm.a, B, mm.b, &beta, C, mm.c, D, mm.d, nullptr, nullptr, 0,
                          nullptr);
  }
  // The heuristic's one algorithm for `mm` (no workspace) into *algo.
  cublasStatus_t heuristic(const Matmul& mm, cublasLtMatmulAlgo_t* algo) {
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, mm.desc, mm.a, mm.b, mm.c, mm.d, pref, 1, &result, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(returned, 1);
    }
    *algo = result.algo;
    return status;
  }
  cublasLtHandle_t handle_ = nullptr;
  std::mt19937 rng_{99};
};

// D = act(alpha op(A) op(B) + beta C + bias) in double; op(A)(i, p) of the column-major A with the given ld.
std::vector<double> reference(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a,
                              const std::vector<float>& b, float beta, const std::vector<float>& c,
                              const std::vector<float>& bias, bool apply_gelu, int batch_index = 0) {
  std::vector<double> d(static_cast<size_t>(m) * n);
  const size_t oa = static_cast<size_t>(batch_index) * m * k, ob = static_cast<size_t>(batch_index) * k * n;
  const size_t oc = static_cast<size_t>(batch_index) * m * n;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const double x = ta ? a[oa + static_cast<size_t>(p + i * k)] : a[oa + static_cast<size_t>(i + p * m)];
        const double y = tb ? b[ob + static_cast<size_t>(j + p * n)] : b[ob + static_cast<size_t>(p + j * k)];
        sum += x * y;
      }
      double v = alpha * sum + beta * c[oc + static_cast<size_t>(i + j * m)];
      if (!bias.empty()) v += bias[static_cast<size_t>(i)];
      d[static_cast<size_t>(i + j * m)] = apply_gelu ? gelu(v) : v;
    }
  }
  return d;
}

TEST_F(CublasLt, Fp32MatmulsWithEveryTranspose) {
  const int m = 37, n = 45, k = 70;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const std::vector<float> a = representable(m * k, rng_), b = representable(k * n, rng_),
                               c = representable(m * n, rng_);
      DeviceBuffer<float> da(a), db(b), dc(c), dd(m * n);
      Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, ta, tb, m, n, k);
      ASSERT_EQ(run(mm, 0.5f, da.get(), db.get(), 2.0f, dc.get(), dd.get()), CUBLAS_STATUS_SUCCESS);
      const std::vector<double> ref = reference(ta, tb, m, n, k, 0.5f, a, b, 2.0f, c, {}, false);
      const std::vector<float> got = dd.download();
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "exact inputs give an exact result, " << i;
    }
  }
}

TEST_F(CublasLt, BiasGeluAndAuxEpilogues) {
  const int m = 24, n = 33, k = 16;
  const std::vector<float> a = representable(m * k, rng_), b = representable(k * n, rng_),
                           bias = representable(m, rng_);
  const std::vector<float> zeros(m * n, 0.0f);
  DeviceBuffer<float> da(a), db(b), dbias(bias), dd(m * n), aux(m * n);
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, true, false, m, n, k);
  const float* bias_ptr = dbias.get();
  void* aux_ptr = aux.get();
  const int64_t aux_ld = m;
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux_ptr);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);

  const auto check = [&](uint32_t epilogue, bool with_bias, bool with_gelu) {
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    ASSERT_EQ(run(mm, 1.0f, da.get(), db.get(), 0.0f, dd.get(), dd.get()), CUBLAS_STATUS_SUCCESS);
    const std::vector<double> ref =
        reference(true, false, m, n, k, 1.0f, a, b, 0.0f, zeros, with_bias ? bias : std::vector<float>{}, with_gelu);
    const std::vector<float> got = dd.download();
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-5 * (1.0 + std::fabs(ref[i]))) << "epilogue " << epilogue << " element " << i;
  };
  check(CUBLASLT_EPILOGUE_DEFAULT, false, false);
  check(CUBLASLT_EPILOGUE_BIAS, true, false);
  check(CUBLASLT_EPILOGUE_GELU, false, true);
  check(CUBLASLT_EPILOGUE_GELU_BIAS, true, true);
  check(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, true, true);
  // The aux output holds the pre-GELU values: the plain matmul plus the bias.
  const std::vector<double> pre = reference(true, false, m, n, k, 1.0f, a, b, 0.0f, zeros, bias, false);
  const std::vector<float> got_aux = aux.download();
  for (size_t i = 0; i < pre.size(); ++i) ASSERT_EQ(got_aux[i], pre[i]) << i;
}

// DGELU, the GELU epilogue's backward: D = (alpha op(A) op(B) + beta C) * gelu'(aux), with aux read (the values the
// forward's GELU_AUX wrote), not written; in bf16 the sum is rounded once, when stored.
TEST_F(CublasLt, GeluGradientEpilogueMultipliesByTheDerivativeAtAux) {
  const int m = 24, n = 33, k = 16;
  const std::vector<float> a = representable(m * k, rng_), b = representable(k * n, rng_),
                           pre = representable(m * n, rng_), c = representable(m * n, rng_);
  const auto derivative = [](double x) {  // of the tanh approximation, in double by a central difference
    const double h = 1e-4;
    return (gelu(x + h) - gelu(x - h)) / (2 * h);
  };
  // The stand-in's tanh is off by up to 2^-19 (gemm.cpp, as cuBLASLt's GELU is off the formula); the derivative
  // moves |d gelu' / d tanh| = |0.5 - x s (1 + 3c x^2) tanh| times as far.
  const auto allowed = [&](double sum, double x) {
    const double s = 0.7978845608028654, c = 0.044715, t = std::tanh(s * (x + c * x * x * x));
    return std::fabs(sum) * std::fabs(0.5 - x * s * (1 + 3 * c * x * x) * t) * 0x1p-19 +
           1e-5 * (1.0 + std::fabs(sum)) * std::fabs(derivative(x));
  };
  const auto set_dgelu = [&](Matmul& mm, const void* aux) {  // the epilogue, reading aux (m x n, ld m)
    const uint32_t epilogue = CUBLASLT_EPILOGUE_DGELU;
    const int64_t aux_ld = m;
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
  };
  for (const float beta : {0.0f, 1.0f}) {
    const std::vector<double> sum = reference(true, false, m, n, k, 1.0f, a, b, beta, c, {}, false);
    DeviceBuffer<float> da(a), db(b), dd(c), aux(pre);
    Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, true, false, m, n, k);
    set_dgelu(mm, aux.get());
    ASSERT_EQ(run(mm, 1.0f, da.get(), db.get(), beta, dd.get(), dd.get()), CUBLAS_STATUS_SUCCESS);
    const std::vector<float> got = dd.download();
    for (size_t i = 0; i < sum.size(); ++i) {
      const double want = sum[i] * derivative(pre[i]);
      ASSERT_NEAR(got[i], want, allowed(sum[i], pre[i]) + 1e-6) << "beta " << beta << " element " << i;
    }
    EXPECT_EQ(aux.download(), pre) << "DGELU reads aux; it must not write it";
  }
  // bf16: the fp32 value rounded once to D's type.
  const std::vector<double> sum = reference(true, false, m, n, k, 1.0f, a, b, 0.0f, c, {}, false);
  DeviceBuffer<__nv_bfloat16> da(convert<__nv_bfloat16>(a)), db(convert<__nv_bfloat16>(b)), dd(m * n),
      aux(convert<__nv_bfloat16>(pre));
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, true, false, m, n, k);
  set_dgelu(mm, aux.get());
  ASSERT_EQ(run(mm, 1.0f, da.get(), db.get(), 0.0f, dd.get(), dd.get()), CUBLAS_STATUS_SUCCESS);
  const std::vector<__nv_bfloat16> got = dd.download();
  for (size_t i = 0; i < sum.size(); ++i) {
    const double want = sum[i] * derivative(pre[i]);
    ASSERT_NEAR(static_cast<float>(got[i]), want, 0x1p-8 * std::fabs(want) + allowed(sum[i], pre[i]) + 1e-6) << i;
  }
}

// BGRADB: the bias pointer receives the sums of op(B)'s columns over k (n of them, D's type), written over whatever
// it held, beside the product (here a weight gradient's shape: bf16 operands into an fp32 D, accumulated with
// beta 1), whichever way B is stored. Eighths summed over k = 40 are exact in fp32. One product, alpha 1: another
// alpha, a batch, or a bias not aligned to its element is refused.
TEST_F(CublasLt, BiasGradientOfBSumsTheColumnsOfOpB) {
  const int m = 24, n = 19, k = 40;
  const std::vector<float> a = representable(m * k, rng_), b = representable(k * n, rng_),
                           c = representable(m * n, rng_);
  const uint32_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
  for (const bool tb : {true, false}) {
    const std::vector<double> want_d = reference(false, tb, m, n, k, 1.0f, a, b, 1.0f, c, {}, false);
    DeviceBuffer<__nv_bfloat16> da(convert<__nv_bfloat16>(a)), db(convert<__nv_bfloat16>(b));
    DeviceBuffer<float> dd(c), grad(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
    Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, false, tb, m, n, k);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<void*>(grad.get()));
    cublasLtMatmulAlgo_t algo{};
    ASSERT_EQ(heuristic(mm, &algo), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(run(mm, 1.0f, da.get(), db.get(), 1.0f, dd.get(), dd.get()), CUBLAS_STATUS_SUCCESS);
    const std::vector<float> got_d = dd.download(), got_grad = grad.download();
    for (size_t i = 0; i < want_d.size(); ++i) ASSERT_EQ(got_d[i], want_d[i]) << "tb " << tb << " D element " << i;
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) sum += tb ? b[static_cast<size_t>(j + p * n)] : b[static_cast<size_t>(p + j * k)];
      ASSERT_EQ(got_grad[static_cast<size_t>(j)], sum) << "tb " << tb << " column " << j;
    }
    EXPECT_EQ(run(mm, 2.0f, da.get(), db.get(), 1.0f, dd.get(), dd.get()), CUBLAS_STATUS_NOT_SUPPORTED);
    mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<void*>(reinterpret_cast<char*>(grad.get()) + 2));
    EXPECT_EQ(heuristic(mm, &algo), CUBLAS_STATUS_NOT_SUPPORTED) << "a float bias gradient at an odd address";
  }
  Matmul batched(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, false, true, m, n, k);
  batched.batch(2, m * k, k * n, m * n);
  batched.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  cublasLtMatmulAlgo_t algo{};
  EXPECT_EQ(heuristic(batched, &algo), CUBLAS_STATUS_NOT_SUPPORTED);
}

// The heuristic's algorithm for `mm` under a preference that allows only the reduction schemes `schemes`.
cublasLtMatmulAlgo_t algorithm(cublasLtHandle_t handle, const Matmul& mm, uint32_t schemes) {
  cublasLtMatmulPreference_t pref = nullptr;
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes),
      CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, mm.desc, mm.a, mm.b, mm.c, mm.d, pref, 1, &result, &returned),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(returned, 1);
  cublasLtMatmulPreferenceDestroy(pref);
  return result.algo;
}

template <typename T>
void expect_low_precision_matmul(cublasLtHandle_t handle, cudaDataType_t type, double relative, std::mt19937& rng) {
  const int m = 20, n = 28, k = 64;
  const std::vector<float> a = representable(m * k, rng), b = representable(k * n, rng), c = representable(m * n, rng);
  DeviceBuffer<T> da(convert<T>(a)), db(convert<T>(b)), dc(convert<T>(c)), dd(m * n);
  Matmul mm(CUBLAS_COMPUTE_32F, type, type, false, true, m, n, k);
  const float alpha = 1.0f, beta = 1.0f;
  const cublasLtMatmulAlgo_t algo = algorithm(handle, mm, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  ASSERT_EQ(cublasLtMatmul(handle, mm.desc, &alpha, da.get(), mm.a, db.get(), mm.b, &beta, dc.get(), mm.c, dd.get(),
                           mm.d, &algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<double> ref = reference(false, true, m, n, k, alpha, a, b, beta, c, {}, false);
  const std::vector<double> product = reference(false, true, m, n, k, alpha, a, b, 0.0f, c, {}, false);
  const std::vector<T> got = dd.download();
  // Accumulated in fp32, the product rounded to the output type before C (16-bit) joins it, then the sum rounded:
  // within a rounding of the product and one of the result.
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(static_cast<float>(got[i]), ref[i], relative * (std::fabs(ref[i]) + std::fabs(product[i])) + 1e-6) << i;
}

TEST_F(CublasLt, Bf16AndFp16InputsAccumulateInFp32) {
  expect_low_precision_matmul<__nv_bfloat16>(handle_, CUDA_R_16BF, 0x1p-8, rng_);
  expect_low_precision_matmul<__half>(handle_, CUDA_R_16F, 0x1p-11, rng_);
}

// A 16-bit product with a long k may add its split-K parts in D's type (cublasLt.h allows it by default): 1 + 2^-8 in
// the first half of k rounds to 1 in bf16 (a tie, to even), and the second half's 2^-8 then rounds away again, where
// the sum rounded once is 1 + 2^-7. Allowing only f32 partial sums (what cublaslt_matmul.cu asks for) gives the latter;
// the default preference, and no algorithm at all, the former.
TEST_F(CublasLt, A16BitProductMayAddItsSplitKPartsIn16Bits) {
  const int k = 64;
  std::vector<float> b(k, 0.0f);
  b[0] = 1.0f;
  b[1] = 0x1p-8f;
  b[k / 2] = 0x1p-8f;
  DeviceBuffer<__nv_bfloat16> da(convert<__nv_bfloat16>(std::vector<float>(k, 1.0f))), db(convert<__nv_bfloat16>(b)),
      dd(1);
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, false, false, 1, 1, k);
  const float alpha = 1.0f, beta = 0.0f;
  const auto product = [&](const cublasLtMatmulAlgo_t* algo) {
    EXPECT_EQ(cublasLtMatmul(handle_, mm.desc, &alpha, da.get(), mm.a, db.get(), mm.b, &beta, dd.get(), mm.c, dd.get(),
                             mm.d, algo, nullptr, 0, nullptr),
              CUBLAS_STATUS_SUCCESS);
    return static_cast<float>(dd.download()[0]);
  };
  const cublasLtMatmulAlgo_t f32_parts = algorithm(handle_, mm, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  const cublasLtMatmulAlgo_t any_parts = algorithm(handle_, mm, CUBLASLT_REDUCTION_SCHEME_MASK);
  EXPECT_EQ(product(&f32_parts), 1.0f + 0x1p-7f);
  EXPECT_EQ(product(&any_parts), 1.0f);
  EXPECT_EQ(product(nullptr), 1.0f);
}

// A 16-bit D with a 16-bit addend, C or the bias: the product is rounded to D's type before the addend joins it, as
// some algorithms did on an H200 (emulation README). The product 1 + 2^-8 rounds to 1 in bf16 (a tie, to even), and
// 1 + 2^-8 rounds to 1 again, where the sum rounded once, 1 + 2^-7, is exact (as with an f32 D).
TEST_F(CublasLt, A16BitAddendJoinsTheProductRoundedToD) {
  const int k = 2;
  DeviceBuffer<__nv_bfloat16> da(convert<__nv_bfloat16>(std::vector<float>(k, 1.0f))),
      db(convert<__nv_bfloat16>(std::vector<float>{1.0f, 0x1p-8f})),
      addend16(convert<__nv_bfloat16>(std::vector<float>{0x1p-8f})), dd(1);
  DeviceBuffer<float> addend32(std::vector<float>{0x1p-8f});
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, false, false, 1, 1, k);
  const auto product = [&](float beta, const void* c) {
    const float alpha = 1.0f;
    EXPECT_EQ(cublasLtMatmul(handle_, mm.desc, &alpha, da.get(), mm.a, db.get(), mm.b, &beta, c, mm.c, dd.get(), mm.d,
                             nullptr, nullptr, 0, nullptr),
              CUBLAS_STATUS_SUCCESS);
    return static_cast<float>(dd.download()[0]);
  };
  EXPECT_EQ(product(0.0f, dd.get()), 1.0f) << "the product alone";
  EXPECT_EQ(product(1.0f, addend16.get()), 1.0f) << "a bf16 C";
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  const void* bias = addend16.get();
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  EXPECT_EQ(product(0.0f, dd.get()), 1.0f) << "a bf16 bias";
  // An f32 D rounds once: the sum, exact.
  DeviceBuffer<float> d32(1);
  Matmul mm32(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, false, false, 1, 1, k);
  const float alpha = 1.0f, beta = 1.0f;
  ASSERT_EQ(cublasLtMatmul(handle_, mm32.desc, &alpha, da.get(), mm32.a, db.get(), mm32.b, &beta, addend32.get(),
                           mm32.c, d32.get(), mm32.d, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d32.download()[0], 1.0f + 0x1p-7f) << "an f32 C";
}

TEST_F(CublasLt, StridedBatches) {
  const int m = 9, n = 11, k = 13, batch = 3;
  const std::vector<float> a = representable(m * k * batch, rng_), b = representable(k * n * batch, rng_),
                           c = representable(m * n * batch, rng_);
  DeviceBuffer<float> da(a), db(b), dc(c), dd(m * n * batch);
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, false, false, m, n, k);
  mm.batch(batch, m * k, k * n, m * n);
  ASSERT_EQ(run(mm, 1.0f, da.get(), db.get(), -1.0f, dc.get(), dd.get()), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = dd.download();
  for (int i = 0; i < batch; ++i) {
    const std::vector<double> ref = reference(false, false, m, n, k, 1.0f, a, b, -1.0f, c, {}, false, i);
    for (int e = 0; e < m * n; ++e) ASSERT_EQ(got[static_cast<size_t>(i * m * n + e)], ref[static_cast<size_t>(e)]);
  }
}

TEST_F(CublasLt, FastTf32ComputeTypeRoundsFp32Inputs) {
  const int n = 64;
  DeviceBuffer<float> a(std::vector<float>(n * n, 1.0f + 0x1p-11f)), b(std::vector<float>(n * n, 1.0f)), d(n * n);
  for (const cublasComputeType_t compute : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    Matmul mm(compute, CUDA_R_32F, CUDA_R_32F, false, false, n, n, n);
    ASSERT_EQ(run(mm, 1.0f, a.get(), b.get(), 0.0f, d.get(), d.get()), CUBLAS_STATUS_SUCCESS);
    const float expected = compute == CUBLAS_COMPUTE_32F ? 64.0f + 64 * 0x1p-11f : 64.0f;
    for (const float v : d.download()) ASSERT_EQ(v, expected) << "compute type " << compute;
  }
}

TEST_F(CublasLt, HeuristicReturnsTheOneAlgorithm) {
  Matmul mm(CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, true, false, 64, 32, 16);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  const uint64_t workspace = 1 << 20;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof workspace),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t results[4] = {};
  int returned = -1;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, mm.desc, mm.a, mm.b, mm.c, mm.d, pref, 4, results, &returned),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(returned, 1);
  EXPECT_EQ(results[0].state, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(results[0].workspaceSize, 0u);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, mm.desc, mm.a, mm.b, mm.c, mm.d, pref, 0, results, &returned),
            CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
}

// cuBLASLt's header (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE): the bias has D's type, another only for integer and fp8
// products. An fp32 bias onto a bf16 D is refused by the heuristic and the matmul; onto an fp32 D it is added.
TEST_F(CublasLt, TheBiasHasDsType) {
  const int m = 16, n = 9, k = 24;
  const std::vector<float> a = representable(m * k, rng_), b = representable(k * n, rng_),
                           bias = representable(m, rng_);
  DeviceBuffer<__nv_bfloat16> da(convert<__nv_bfloat16>(a)), db(convert<__nv_bfloat16>(b)), d16(m * n);
  DeviceBuffer<float> dbias(bias), d32(m * n);
  const float* bias_ptr = dbias.get();
  const int32_t f32 = CUDA_R_32F;
  const auto with_f32_bias = [&](Matmul& mm) {
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS));
    mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);
    mm.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, f32);
  };
  {
    Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, true, false, m, n, k);
    with_f32_bias(mm);
    cublasLtMatmulAlgo_t algo{};
    EXPECT_EQ(heuristic(mm, &algo), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(run(mm, 1.0f, da.get(), db.get(), 0.0f, d16.get(), d16.get()), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, true, false, m, n, k);
  with_f32_bias(mm);
  ASSERT_EQ(run(mm, 1.0f, da.get(), db.get(), 0.0f, d32.get(), d32.get()), CUBLAS_STATUS_SUCCESS);
  const std::vector<double> ref =
      reference(true, false, m, n, k, 1.0f, a, b, 0.0f, std::vector<float>(m * n), bias, false);
  const std::vector<float> got = d32.download();
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "exact inputs give an exact result, " << i;
}

// The heuristic reads the bias pointer to learn its alignment (cuBLASLt's header: routines that do not dereference
// it "depend on its value to determine expected pointer alignment"); the algorithm it returns refuses a bias less
// aligned than the one it was chosen for, and a bias not aligned to its element size is refused outright.
TEST_F(CublasLt, TheHeuristicLearnsTheBiasAlignmentFromItsPointer) {
  const int m = 16, n = 5, k = 8;
  const std::vector<float> a = representable(m * k, rng_), b = representable(k * n, rng_),
                           bias = representable(m + 1, rng_);
  DeviceBuffer<float> da(a), db(b), dbias(bias), dd(m * n);
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, false, false, m, n, k);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS));
  const float* aligned = dbias.get();  // 256 bytes, as cudaMalloc aligns
  const float* shifted = aligned + 1;  // 4 bytes
  const auto run_with = [&](const cublasLtMatmulAlgo_t* algo) {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(handle_, mm.desc, &alpha, da.get(), mm.a, db.get(), mm.b, &beta, dd.get(), mm.c, dd.get(),
                          mm.d, algo, nullptr, 0, nullptr);
  };
  cublasLtMatmulAlgo_t for_aligned{}, for_shifted{};
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned);
  ASSERT_EQ(heuristic(mm, &for_aligned), CUBLAS_STATUS_SUCCESS);
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, shifted);
  EXPECT_EQ(run_with(&for_aligned), CUBLAS_STATUS_NOT_SUPPORTED) << "chosen for a bias aligned to 16 bytes";
  ASSERT_EQ(heuristic(mm, &for_shifted), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(run_with(&for_shifted), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> shifted_bias(bias.begin() + 1, bias.end());
  const std::vector<double> ref =
      reference(false, false, m, n, k, 1.0f, a, b, 0.0f, std::vector<float>(m * n), shifted_bias, false);
  const std::vector<float> got = dd.download();
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << i;
  // A more aligned bias than the algorithm was chosen for is fine.
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned);
  EXPECT_EQ(run_with(&for_shifted), CUBLAS_STATUS_SUCCESS);
  // Half a float off: no algorithm reads it.
  const void* torn = reinterpret_cast<const char*>(aligned) + 2;
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, torn);
  cublasLtMatmulAlgo_t none{};
  EXPECT_EQ(heuristic(mm, &none), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(run_with(nullptr), CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(CublasLt, UnsupportedOrInconsistentArgumentsAreRefused) {
  DeviceBuffer<float> x(64 * 64);
  {
    Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, false, false, 8, 8, 8);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_DGELU_BGRAD));
    EXPECT_EQ(run(mm, 1.0f, x.get(), x.get(), 0.0f, x.get(), x.get()), CUBLAS_STATUS_NOT_SUPPORTED);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_DGELU));  // and no aux matrix
    EXPECT_EQ(run(mm, 1.0f, x.get(), x.get(), 0.0f, x.get(), x.get()), CUBLAS_STATUS_INVALID_VALUE);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS));  // and no bias pointer
    EXPECT_EQ(run(mm, 1.0f, x.get(), x.get(), 0.0f, x.get(), x.get()), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(mm.desc, CUBLASLT_MATMUL_DESC_TRANSA, x.get(), 3),
              CUBLAS_STATUS_INVALID_VALUE);  // the wrong size for the attribute
  }
  {
    Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, false, false, 8, 8, 8);
    const uint64_t rows = 9;  // op(A) no longer 8 x k
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(mm.a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(run(mm, 1.0f, x.get(), x.get(), 0.0f, x.get(), x.get()), CUBLAS_STATUS_INVALID_VALUE);
  }
  {
    Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, false, false, 8, 8, 8);
    const int32_t row_major = CUBLASLT_ORDER_ROW;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(mm.b, CUBLASLT_MATRIX_LAYOUT_ORDER, &row_major, sizeof row_major),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(run(mm, 1.0f, x.get(), x.get(), 0.0f, x.get(), x.get()), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    Matmul mm(CUBLAS_COMPUTE_64F, CUDA_R_32F, CUDA_R_32F, false, false, 8, 8, 8);
    EXPECT_EQ(run(mm, 1.0f, x.get(), x.get(), 0.0f, x.get(), x.get()), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  Matmul mm(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, false, false, 8, 8, 8);
  EXPECT_EQ(cublasLtMatmul(nullptr, mm.desc, nullptr, nullptr, mm.a, nullptr, mm.b, nullptr, nullptr, mm.c, nullptr,
                           mm.d, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

// ---------------------------------------------------------------- the half-precision types

uint16_t half_bits(float f) {
  return __float2half(f).__x;
}
uint16_t bf16_bits(float f) {
  return __float2bfloat16(f).__x;
}

TEST(HalfTypes, Fp16RoundsToNearestEven) {
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);             // the largest half
  EXPECT_EQ(half_bits(65519.0f), 0x7bff);             // below the halfway point to 65536
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);             // the halfway point rounds to even: infinity
  EXPECT_EQ(half_bits(1.0f + 0x1p-11f), 0x3c00);      // a tie: to even
  EXPECT_EQ(half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);  // a tie: to even (up)
  EXPECT_EQ(half_bits(0x1p-24f), 0x0001);             // the smallest subnormal
  EXPECT_EQ(half_bits(0x1p-25f), 0x0000);             // half of it: a tie, to even (zero)
  EXPECT_EQ(half_bits(3 * 0x1p-25f), 0x0002);         // 1.5 units: to even (2)
  EXPECT_EQ(half_bits(std::numeric_limits<float>::quiet_NaN()) & 0x7c00, 0x7c00);
  EXPECT_NE(half_bits(std::numeric_limits<float>::quiet_NaN()) & 0x03ff, 0);
  for (const float f : {0.5f, -3.25f, 0x1p-14f, 0x1p-20f, 1000.0f, -65504.0f})
    EXPECT_EQ(__half2float(__float2half(f)), f) << f;
}

TEST(HalfTypes, Bf16RoundsToNearestEvenAndArithmeticRoundsOnce) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(1.0f + 0x1p-8f), 0x3f80);      // a tie: to even
  EXPECT_EQ(bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);  // a tie: to even (up)
  EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  const __nv_bfloat16 x = 1.5f, y = 2.25f;
  EXPECT_EQ(static_cast<float>(x * y), 3.375f);
  EXPECT_EQ(static_cast<float>(__hfma(x, y, __float2bfloat16(0.125f))), 3.5f);
  const __half h = 0.5f;
  EXPECT_EQ(static_cast<float>(h + h), 1.0f);
}

}  // namespace
}  // namespace lab::cuda::emu::test
