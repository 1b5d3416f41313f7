// Op consistency: every CUDA op, forward and backward, against the CPU reference on fresh random inputs,
// at several shapes: tiny and odd sizes, sizes just off the block sizes (255, 257, 33, 129 ...), GPT-2's
// own sizes, and the padded vocabulary (50257 real columns of 50304).
//
// Outputs are poisoned with NaN before each run, so an element the kernel forgets to write fails the
// comparison. Gradients start from random non-zero values on both sides, so a kernel that overwrites
// instead of accumulating (+=) fails too. Inputs far from zero punish unstable numerics: logits and
// attention scores around +1000 (a softmax without its max subtraction overflows), LayerNorm rows with mean
// 1e4 and std 1 (a one-pass variance E[x^2] - E[x]^2 cancels to noise). Both sides go through the public ops
// (lab::ops::...), so the dispatch is exercised as well. TF32 is off: these compare strict fp32 results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "common/cuda/cublas.h"
#include "common/ops/adamw.h"
#include "common/ops/attention.h"
#include "common/ops/classifier.h"
#include "common/ops/embedding.h"
#include "common/ops/gelu.h"
#include "common/ops/layernorm.h"
#include "common/ops/linear.h"
#include "common/ops/reduce.h"
#include "common/ops/residual.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::all_close;
using test::kGpu;
using test::poisoned;
using test::random_ids;
using test::random_normal;
using test::Tolerance;
using test::tolerance_for;
using test::tolerance_for_offset;

Tensor on_gpu(const Tensor& t) {
  return t.to(kGpu);
}

// The fixture of every suite below: skips without a GPU, runs strict fp32, and seeds from the test name so
// each test draws its own inputs.
template <typename Param>
class OpTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
    cuda::set_tf32(false);
    rng_.reseed(std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }
  Rng rng_;
};

// Every case below prints as its name(), so CTest lists "Shapes/LinearTest.ForwardAndBackwardMatchCpu/B2_T64_..."
// (CTest shows the printed value where GoogleTest's numeric index would be).
template <typename Case>
requires requires(const Case& c) {
  c.name();
}
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name();
}

// ================================================================ embedding

struct EmbeddingCase {
  int64_t B, T, C, Vp, maxT;
  int64_t distinct;  // token ids are drawn from [0, distinct): small values force many repeats
  std::string name() const { return cat("B", B, "_T", T, "_C", C, "_Vp", Vp, "_ids", distinct); }
};

class EmbeddingTest : public OpTest<EmbeddingCase> {};

TEST_P(EmbeddingTest, ForwardAndBackwardMatchCpu) {
  const EmbeddingCase p = GetParam();
  const Tensor tokens = random_ids({p.B, p.T}, rng_, p.distinct);
  const Tensor wte = random_normal({p.Vp, p.C}, rng_);
  const Tensor wpe = random_normal({p.maxT, p.C}, rng_);

  const Tensor out = Tensor::empty({p.B, p.T, p.C}, DType::F32);
  ops::embedding_forward(out, tokens, wte, wpe);
  const Tensor out_gpu = poisoned({p.B, p.T, p.C}, kGpu);
  ops::embedding_forward(out_gpu, on_gpu(tokens), on_gpu(wte), on_gpu(wpe));
  EXPECT_TRUE(all_close("embedding out", out_gpu, out, tolerance_for(DType::F32, 1)));

  const Tensor dout = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor dwte = random_normal({p.Vp, p.C}, rng_);
  const Tensor dwpe = random_normal({p.maxT, p.C}, rng_);
  const Tensor dwte_initial = dwte.clone();
  const Tensor dwte_gpu = on_gpu(dwte), dwpe_gpu = on_gpu(dwpe);
  ops::embedding_backward(dwte, dwpe, dout, tokens);
  ops::embedding_backward(dwte_gpu, dwpe_gpu, on_gpu(dout), on_gpu(tokens));
  // A row of dwte sums every position holding its token: up to B*T terms, in atomic (arbitrary) order.
  EXPECT_TRUE(all_close("embedding dwte", dwte_gpu, dwte, tolerance_for(DType::F32, p.B * p.T)));
  EXPECT_TRUE(all_close("embedding dwpe", dwpe_gpu, dwpe, tolerance_for(DType::F32, p.B)));
  // Every column of every row: a row whose token occurs changed in every column; a row whose token does not
  // occur kept its exact bits.
  std::vector<bool> occurs(static_cast<size_t>(p.Vp), false);
  for (const int32_t id : tokens.to_ints()) occurs[static_cast<size_t>(id)] = true;
  const std::vector<float> before = dwte_initial.to_floats(), after = dwte_gpu.to_floats();
  int64_t wrong = 0;
  for (int64_t v = 0; v < p.Vp; ++v) {
    for (int64_t c = 0; c < p.C; ++c) {
      const size_t i = static_cast<size_t>(v * p.C + c);
      if (occurs[static_cast<size_t>(v)] ? after[i] == before[i] : after[i] != before[i]) ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << "dwte elements of occurring rows left unchanged, or of absent rows changed";
}

// The last case puts one token at every position: each block (one position, 256 channels) adds into the
// same row of dwte as the blocks beside it, at the same time, 512 times per thread. Without atomics, updates
// get lost (the emulation build runs blocks on several threads at once, as a GPU does).
INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingTest,
                         ::testing::Values(EmbeddingCase{1, 1, 1, 1, 1, 1}, EmbeddingCase{2, 5, 7, 11, 8, 11},
                                           EmbeddingCase{3, 33, 130, 257, 40, 3},
                                           EmbeddingCase{2, 17, 768, 1024, 32, 2},
                                           EmbeddingCase{4, 64, 96, 50304, 64, 50257},
                                           EmbeddingCase{512, 64, 256, 128, 64, 1}));

TEST(EmbeddingGpu, OutOfRangeTokenGivesNanRowAndNoGradient) {
  LAB_REQUIRE_GPU();
  Rng rng(7);
  const int64_t T = 4, C = 5, V = 6;
  const Tensor wte = random_normal({V, C}, rng), wpe = random_normal({T, C}, rng);
  const std::vector<int32_t> ids = {0, -1, static_cast<int32_t>(V), 5};
  const Tensor tokens = Tensor::from_ints(ids, {1, T});
  const Tensor out = poisoned({1, T, C}, kGpu);
  ops::embedding_forward(out, on_gpu(tokens), on_gpu(wte), on_gpu(wpe));
  const std::vector<float> o = out.to_floats();
  const std::vector<float> te = wte.to_floats(), pe = wpe.to_floats();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      const float got = o[t * C + c];
      if (ids[t] < 0 || ids[t] >= V) {
        EXPECT_TRUE(std::isnan(got)) << "position " << t;
      } else {
        EXPECT_FLOAT_EQ(got, te[ids[t] * C + c] + pe[t * C + c]) << "position " << t;
      }
    }
  }
  // The backward skips the bad ids: dwte only receives the valid positions' gradients, in every column.
  const Tensor dwte = Tensor::zeros({V, C}, DType::F32, kGpu), dwpe = Tensor::zeros({T, C}, DType::F32, kGpu);
  const Tensor dout = Tensor::from_floats(std::vector<float>(T * C, 1.0f), {1, T, C}, kGpu);
  ops::embedding_backward(dwte, dwpe, dout, on_gpu(tokens));
  const std::vector<float> g = dwte.to_floats(), gp = dwpe.to_floats();
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t v = 0; v < V; ++v)
      EXPECT_EQ(g[v * C + c], (v == 0 || v == 5) ? 1.0f : 0.0f) << "dwte row " << v << ", column " << c;
    for (int64_t t = 0; t < T; ++t) EXPECT_EQ(gp[t * C + c], 1.0f) << "dwpe receives every position: " << t;
  }
}

// ================================================================ linear

struct LinearCase {
  int64_t B, T, C, OC;  // input [B, T, C]: leading dims flattened into N = B*T rows
  bool bias;
  std::string name() const { return cat("B", B, "_T", T, "_C", C, "_OC", OC, bias ? "_bias" : "_nobias"); }
};

class LinearTest : public OpTest<LinearCase> {};

TEST_P(LinearTest, ForwardAndBackwardMatchCpu) {
  const LinearCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, std::max({p.C, p.OC, p.B * p.T}));
  const Tensor inp = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor weight = random_normal({p.OC, p.C}, rng_, 0.5f);
  const Tensor bias = p.bias ? random_normal({p.OC}, rng_) : Tensor();

  const Tensor out = Tensor::empty({p.B, p.T, p.OC}, DType::F32);
  ops::linear_forward(out, inp, weight, bias);
  const Tensor out_gpu = poisoned({p.B, p.T, p.OC}, kGpu);
  ops::linear_forward(out_gpu, on_gpu(inp), on_gpu(weight), p.bias ? on_gpu(bias) : Tensor());
  EXPECT_TRUE(all_close("linear out", out_gpu, out, tol));

  const Tensor dout = random_normal({p.B, p.T, p.OC}, rng_);
  const Tensor dinp = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor dweight = random_normal({p.OC, p.C}, rng_);
  const Tensor dbias = p.bias ? random_normal({p.OC}, rng_) : Tensor();
  const Tensor dinp_gpu = on_gpu(dinp), dweight_gpu = on_gpu(dweight);
  const Tensor dbias_gpu = p.bias ? on_gpu(dbias) : Tensor();
  ops::linear_backward(dinp, dweight, dbias, dout, inp, weight);
  ops::linear_backward(dinp_gpu, dweight_gpu, dbias_gpu, on_gpu(dout), on_gpu(inp), on_gpu(weight));
  EXPECT_TRUE(all_close("linear dinp", dinp_gpu, dinp, tol));
  EXPECT_TRUE(all_close("linear dweight", dweight_gpu, dweight, tol));
  if (p.bias) {
    EXPECT_TRUE(all_close("linear dbias", dbias_gpu, dbias, tol));
  }
}

// GradWrite::Overwrite: dinp = dout @ weight over a buffer of NaNs, which neither side may read; the reference is the
// CPU's dinp accumulated from zeros.
TEST_P(LinearTest, BackwardWritesDinpOverWithoutReadingIt) {
  const LinearCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, std::max({p.C, p.OC, p.B * p.T}));
  const Tensor inp = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor weight = random_normal({p.OC, p.C}, rng_, 0.5f);
  const Tensor dout = random_normal({p.B, p.T, p.OC}, rng_);
  const Tensor from_zeros = Tensor::zeros({p.B, p.T, p.C}, DType::F32);
  ops::linear_backward(from_zeros, Tensor(), Tensor(), dout, inp, weight);
  const Tensor dinp = poisoned({p.B, p.T, p.C}, Device::cpu()), dinp_gpu = poisoned({p.B, p.T, p.C}, kGpu);
  ops::linear_backward(dinp, Tensor(), Tensor(), dout, inp, weight, ops::GradWrite::Overwrite);
  ops::linear_backward(dinp_gpu, Tensor(), Tensor(), on_gpu(dout), on_gpu(inp), on_gpu(weight),
                       ops::GradWrite::Overwrite);
  EXPECT_TRUE(all_close("linear dinp (written over, CPU)", dinp, from_zeros, tol));
  EXPECT_TRUE(all_close("linear dinp (written over)", dinp_gpu, from_zeros, tol));
}

// dparams_write Overwrite (a training step's first contribution to the layer's parameters): dweight and dbias written
// over buffers of NaNs, which neither side may read; the reference is the CPU's accumulated from zeros.
TEST_P(LinearTest, BackwardWritesTheParametersGradientsOverWithoutReadingThem) {
  const LinearCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, std::max({p.C, p.OC, p.B * p.T}));
  const Tensor inp = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor weight = random_normal({p.OC, p.C}, rng_, 0.5f);
  const Tensor dout = random_normal({p.B, p.T, p.OC}, rng_);
  const Tensor dweight_zeros = Tensor::zeros({p.OC, p.C}, DType::F32);
  const Tensor dbias_zeros = p.bias ? Tensor::zeros({p.OC}, DType::F32) : Tensor();
  ops::linear_backward(Tensor(), dweight_zeros, dbias_zeros, dout, inp, weight);
  for (const Device device : {Device::cpu(), kGpu}) {
    const std::string where = device.is_cuda() ? "" : ", CPU";
    const Tensor dweight = poisoned({p.OC, p.C}, device), dbias = p.bias ? poisoned({p.OC}, device) : Tensor();
    ops::linear_backward(Tensor(), dweight, dbias, dout.to(device), inp.to(device), weight.to(device),
                         ops::GradWrite::Add, ops::GradWrite::Overwrite);
    EXPECT_TRUE(all_close(("linear dweight (written over" + where + ")").c_str(), dweight, dweight_zeros, tol));
    if (p.bias) {
      EXPECT_TRUE(all_close(("linear dbias (written over" + where + ")").c_str(), dbias, dbias_zeros, tol));
    }
  }
}

TEST_P(LinearTest, BackwardSkipsUndefinedGradients) {
  const LinearCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, std::max({p.C, p.OC, p.B * p.T}));
  const Tensor inp = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor weight = random_normal({p.OC, p.C}, rng_, 0.5f);
  const Tensor dout = random_normal({p.B, p.T, p.OC}, rng_);
  const Tensor dweight = random_normal({p.OC, p.C}, rng_);
  const Tensor dweight_gpu = on_gpu(dweight);
  ops::linear_backward(Tensor(), dweight, Tensor(), dout, inp, weight);
  ops::linear_backward(Tensor(), dweight_gpu, Tensor(), on_gpu(dout), on_gpu(inp), on_gpu(weight));
  EXPECT_TRUE(all_close("linear dweight (alone)", dweight_gpu, dweight, tol));
}

// The bias as a view starting one float into a buffer (aligned to 4 bytes only, as a tensor-parallel shard of a
// bias may be; the parameters themselves start at multiples of 128 bytes): cuBLASLt's algorithm is chosen for the
// bias pointer it reads, so the bias epilogue works at any float's address. Every shape, with a bias.
TEST_P(LinearTest, ForwardReadsABiasAtAnyFloat) {
  const LinearCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, std::max({p.C, p.OC, p.B * p.T}));
  const Tensor inp = random_normal({p.B, p.T, p.C}, rng_);
  const Tensor weight = random_normal({p.OC, p.C}, rng_, 0.5f);
  const Tensor buffer = random_normal({p.OC + 1}, rng_);
  const Tensor out = Tensor::empty({p.B, p.T, p.OC}, DType::F32);
  ops::linear_forward(out, inp, weight, buffer.view(1, {p.OC}));
  const Tensor out_gpu = poisoned({p.B, p.T, p.OC}, kGpu);
  const Tensor bias_gpu = on_gpu(buffer).view(1, {p.OC});
  ASSERT_EQ(reinterpret_cast<uintptr_t>(bias_gpu.raw()) % 8, 4u) << "the view should be aligned to 4 bytes only";
  ops::linear_forward(out_gpu, on_gpu(inp), on_gpu(weight), bias_gpu);
  EXPECT_TRUE(all_close("linear out (bias view)", out_gpu, out, tol));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(LinearCase{1, 1, 1, 1, true}, LinearCase{1, 7, 13, 5, true},
                                           LinearCase{3, 11, 65, 129, false}, LinearCase{2, 33, 257, 255, true},
                                           LinearCase{2, 64, 768, 2304, true}, LinearCase{4, 513, 64, 33, true}));

// ================================================================ layernorm

struct LayerNormCase {
  int64_t N, C;
  std::string name() const { return cat("N", N, "_C", C); }
};

class LayerNormTest : public OpTest<LayerNormCase> {};

// Runs forward and backward on both devices for rows x + offset, x ~ N(0, std), and compares with `tol`.
void expect_layernorm_matches_cpu(const LayerNormCase& p, Rng& rng, float offset, float std, Tolerance tol) {
  std::vector<float> xs = random_normal({p.N, p.C}, rng, std).to_floats();
  for (float& v : xs) v += offset;
  const Tensor x = Tensor::from_floats(xs, {p.N, p.C});
  const Tensor w = random_normal({p.C}, rng), b = random_normal({p.C}, rng);

  const Tensor out = Tensor::empty({p.N, p.C}, DType::F32);
  const Tensor mean = Tensor::empty({p.N}, DType::F32), rstd = Tensor::empty({p.N}, DType::F32);
  ops::layernorm_forward(out, mean, rstd, x, w, b);
  const Tensor out_gpu = poisoned({p.N, p.C}, kGpu);
  const Tensor mean_gpu = poisoned({p.N}, kGpu), rstd_gpu = poisoned({p.N}, kGpu);
  ops::layernorm_forward(out_gpu, mean_gpu, rstd_gpu, on_gpu(x), on_gpu(w), on_gpu(b));
  EXPECT_TRUE(all_close("layernorm out", out_gpu, out, tol));
  EXPECT_TRUE(all_close("layernorm mean", mean_gpu, mean, tol));
  EXPECT_TRUE(all_close("layernorm rstd", rstd_gpu, rstd, tol));

  // The backward of both sides reads the CPU statistics, so it is compared on identical inputs.
  const Tensor dout = random_normal({p.N, p.C}, rng);
  const Tensor dx = random_normal({p.N, p.C}, rng);
  const Tensor dw = random_normal({p.C}, rng), db = random_normal({p.C}, rng);
  const Tensor dx_gpu = on_gpu(dx), dw_gpu = on_gpu(dw), db_gpu = on_gpu(db);
  ops::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd);
  ops::layernorm_backward(dx_gpu, dw_gpu, db_gpu, on_gpu(dout), on_gpu(x), on_gpu(w), on_gpu(mean), on_gpu(rstd));
  EXPECT_TRUE(all_close("layernorm dx", dx_gpu, dx, tol));
  EXPECT_TRUE(all_close("layernorm dw", dw_gpu, dw, tol));
  EXPECT_TRUE(all_close("layernorm db", db_gpu, db, tol));

  // dx written over (GradWrite::Overwrite) a buffer of NaNs, which neither side may read: the backward from zeros.
  const auto zeros = [](const Shape& shape, Device device) { return Tensor::zeros(shape, DType::F32, device); };
  const Tensor from_zeros = zeros({p.N, p.C}, Device::cpu());
  ops::layernorm_backward(from_zeros, zeros({p.C}, Device::cpu()), zeros({p.C}, Device::cpu()), dout, x, w, mean, rstd);
  const Tensor over = poisoned({p.N, p.C}, Device::cpu()), over_gpu = poisoned({p.N, p.C}, kGpu);
  ops::layernorm_backward(over, zeros({p.C}, Device::cpu()), zeros({p.C}, Device::cpu()), dout, x, w, mean, rstd,
                          ops::GradWrite::Overwrite);
  ops::layernorm_backward(over_gpu, zeros({p.C}, kGpu), zeros({p.C}, kGpu), on_gpu(dout), on_gpu(x), on_gpu(w),
                          on_gpu(mean), on_gpu(rstd), ops::GradWrite::Overwrite);
  EXPECT_TRUE(all_close("layernorm dx (written over, CPU)", over, from_zeros, tol));
  EXPECT_TRUE(all_close("layernorm dx (written over)", over_gpu, from_zeros, tol));

  // dw and db written over NaNs (dparams_write Overwrite, a training step's first contribution), never read.
  const Tensor dw_zeros = zeros({p.C}, Device::cpu()), db_zeros = zeros({p.C}, Device::cpu());
  ops::layernorm_backward(zeros({p.N, p.C}, Device::cpu()), dw_zeros, db_zeros, dout, x, w, mean, rstd);
  for (const Device device : {Device::cpu(), kGpu}) {
    const std::string where = device.is_cuda() ? ")" : ", CPU)";
    const Tensor dw_over = poisoned({p.C}, device), db_over = poisoned({p.C}, device);
    ops::layernorm_backward(zeros({p.N, p.C}, device), dw_over, db_over, dout.to(device), x.to(device), w.to(device),
                            mean.to(device), rstd.to(device), ops::GradWrite::Add, ops::GradWrite::Overwrite);
    EXPECT_TRUE(all_close(("layernorm dw (written over" + where).c_str(), dw_over, dw_zeros, tol));
    EXPECT_TRUE(all_close(("layernorm db (written over" + where).c_str(), db_over, db_zeros, tol));
  }
}

TEST_P(LayerNormTest, ForwardAndBackwardMatchCpu) {
  const LayerNormCase p = GetParam();
  // An offset and a spread, as activations have: the statistics must not lose the small deviations.
  expect_layernorm_matches_cpu(p, rng_, 3.0f, 2.0f, tolerance_for(DType::F32, std::max(p.N, p.C)));
}

// Mean 1e4, std 1: E[x^2] - E[x]^2 would subtract two numbers near 1e8 whose float rounding (about 8) is far
// larger than the variance (1). Only a variance taken around the mean survives.
TEST_P(LayerNormTest, RowsFarFromZeroMatchCpu) {
  const LayerNormCase p = GetParam();
  expect_layernorm_matches_cpu(p, rng_, 1e4f, 1.0f, tolerance_for_offset(DType::F32, std::max(p.N, p.C), 1e4));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormTest,
                         ::testing::Values(LayerNormCase{1, 1}, LayerNormCase{5, 7}, LayerNormCase{9, 33},
                                           LayerNormCase{3, 64}, LayerNormCase{33, 768}, LayerNormCase{257, 1600},
                                           LayerNormCase{1000, 31}, LayerNormCase{4099, 96}));

// ================================================================ elementwise: gelu, residual

struct ElementwiseCase {
  int64_t n;
  std::string name() const { return cat("n", n); }
};

class GeluTest : public OpTest<ElementwiseCase> {};

TEST_P(GeluTest, ForwardAndBackwardMatchCpu) {
  const int64_t n = GetParam().n;
  const Tolerance tol = tolerance_for(DType::F32, 1);
  const Tensor x = random_normal({n}, rng_, 3.0f);  // wide enough to reach both tails
  const Tensor out = Tensor::empty({n}, DType::F32);
  ops::gelu_forward(out, x);
  const Tensor out_gpu = poisoned({n}, kGpu);
  ops::gelu_forward(out_gpu, on_gpu(x));
  EXPECT_TRUE(all_close("gelu out", out_gpu, out, tol));

  const Tensor dout = random_normal({n}, rng_);
  const Tensor dx = random_normal({n}, rng_);
  const Tensor dx_gpu = on_gpu(dx);
  ops::gelu_backward(dx, x, dout);
  ops::gelu_backward(dx_gpu, on_gpu(x), on_gpu(dout));
  EXPECT_TRUE(all_close("gelu dx", dx_gpu, dx, tol));

  // Written over (GradWrite::Overwrite) a buffer of NaNs, which neither side may read: the backward from zeros.
  const Tensor from_zeros = Tensor::zeros({n}, DType::F32);
  ops::gelu_backward(from_zeros, x, dout);
  const Tensor over = poisoned({n}, Device::cpu()), over_gpu = poisoned({n}, kGpu);
  ops::gelu_backward(over, x, dout, ops::GradWrite::Overwrite);
  ops::gelu_backward(over_gpu, on_gpu(x), on_gpu(dout), ops::GradWrite::Overwrite);
  EXPECT_TRUE(all_close("gelu dx (written over, CPU)", over, from_zeros, tol));
  EXPECT_TRUE(all_close("gelu dx (written over)", over_gpu, from_zeros, tol));
}

// Both backends against GELU in double precision over [-9, 9], element by element: in the negative tail
// gelu(x) is tiny (-1e-28 at x = -9) and 0.5 x (1 + tanh(u)) in float loses every digit there, since 1 + tanh(u)
// cancels. The bound is exp's condition: an input rounded by eps gives exp(-2u) a relative error of |2u| eps.
TEST(GeluGpu, TailsMatchDoublePrecision) {
  LAB_REQUIRE_GPU();
  std::vector<float> xs;
  for (int i = -4500; i <= 4500; ++i) xs.push_back(static_cast<float>(i) / 500.0f);
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = Tensor::from_floats(xs, {n});
  const Tensor ones = Tensor::from_floats(std::vector<float>(xs.size(), 1.0f), {n});
  for (const Device device : {Device::cpu(), kGpu}) {
    const Tensor out = poisoned({n}, device), dx = Tensor::zeros({n}, DType::F32, device);
    ops::gelu_forward(out, x.to(device));
    ops::gelu_backward(dx, x.to(device), ones.to(device));
    const std::vector<float> y = out.to_floats(), g = dx.to_floats();
    int64_t bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double v = xs[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
      const double s = 1.0 / (1.0 + std::exp(-2.0 * u));
      const double value = v * s,
                   slope = s + 2.0 * v * s * (1.0 - s) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * v * v);
      const double rel = 8.0 * 0x1p-23 * (1.0 + std::fabs(2.0 * u));
      if (!(std::fabs(y[i] - value) <= rel * std::fabs(value)) && ++bad <= 5)
        ADD_FAILURE() << device.str() << ": gelu(" << v << ") = " << y[i] << ", expected " << value;
      if (!(std::fabs(g[i] - slope) <= rel * std::fabs(slope) + 8.0 * 0x1p-23) && ++bad <= 5)
        ADD_FAILURE() << device.str() << ": gelu'(" << v << ") = " << g[i] << ", expected " << slope;
    }
    EXPECT_EQ(bad, 0) << device.str();
  }
}

class ResidualTest : public OpTest<ElementwiseCase> {};

TEST_P(ResidualTest, ForwardAndBackwardMatchCpu) {
  const int64_t n = GetParam().n;
  const Tolerance tol = tolerance_for(DType::F32, 1);
  const Tensor a = random_normal({n}, rng_), b = random_normal({n}, rng_);
  const Tensor out = Tensor::empty({n}, DType::F32);
  ops::residual_forward(out, a, b);
  const Tensor out_gpu = poisoned({n}, kGpu);
  ops::residual_forward(out_gpu, on_gpu(a), on_gpu(b));
  EXPECT_TRUE(all_close("residual out", out_gpu, out, tol));

  const Tensor dout = random_normal({n}, rng_);
  const Tensor da = random_normal({n}, rng_), db = random_normal({n}, rng_);
  const Tensor da_gpu = on_gpu(da), db_gpu = on_gpu(db);
  ops::residual_backward(da, db, dout);
  ops::residual_backward(da_gpu, db_gpu, on_gpu(dout));
  EXPECT_TRUE(all_close("residual da", da_gpu, da, tol));
  EXPECT_TRUE(all_close("residual db", db_gpu, db, tol));

  // One gradient undefined: only the other accumulates.
  ops::residual_backward(Tensor(), db, dout);
  ops::residual_backward(Tensor(), db_gpu, on_gpu(dout));
  EXPECT_TRUE(all_close("residual db (da undefined)", db_gpu, db, tol));

  // The gradient of an input that starts at the add: a copy of dout, on both devices.
  const Tensor copy = poisoned({n}, Device::cpu()), copy_gpu = poisoned({n}, kGpu);
  ops::residual_gradient_copy(copy, dout);
  ops::residual_gradient_copy(copy_gpu, on_gpu(dout));
  EXPECT_EQ(copy.to_floats(), dout.to_floats());
  EXPECT_EQ(copy_gpu.to_floats(), dout.to_floats());
}

// The tape may hand the residual backward the gradient buffer of its output as da (the gradient flows
// through unchanged, as llm.c does): da = dout + dout and db += dout, on both devices.
TEST_P(ResidualTest, BackwardIntoTheBufferOfDoutMatchesCpu) {
  const int64_t n = GetParam().n;
  const Tensor dout = random_normal({n}, rng_), db = random_normal({n}, rng_);
  const std::vector<float> g = dout.to_floats(), db0 = db.to_floats();
  std::vector<float> doubled(g.size()), db_expected(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    doubled[i] = g[i] + g[i];
    db_expected[i] = db0[i] + g[i];
  }
  const Tensor dout_gpu = on_gpu(dout), db_gpu = on_gpu(db);
  ops::residual_backward(dout, db, dout);
  ops::residual_backward(dout_gpu, db_gpu, dout_gpu);
  EXPECT_EQ(dout.to_floats(), doubled) << "CPU: da aliasing dout";
  EXPECT_EQ(db.to_floats(), db_expected) << "CPU: db must receive the original dout";
  EXPECT_EQ(dout_gpu.to_floats(), doubled) << "CUDA: da aliasing dout";
  EXPECT_EQ(db_gpu.to_floats(), db_expected) << "CUDA: db must receive the original dout";

  // And the other way round: db is dout's buffer.
  const Tensor dout2 = random_normal({n}, rng_), da = random_normal({n}, rng_);
  const Tensor dout2_gpu = on_gpu(dout2), da_gpu = on_gpu(da);
  ops::residual_backward(da, dout2, dout2);
  ops::residual_backward(da_gpu, dout2_gpu, dout2_gpu);
  EXPECT_EQ(da_gpu.to_floats(), da.to_floats());
  EXPECT_EQ(dout2_gpu.to_floats(), dout2.to_floats());
}

// 4096 splits into 16-byte pieces, which GELU's kernels then take (gelu.cu); the others do not.
const auto kElementwiseSizes = ::testing::Values(ElementwiseCase{1}, ElementwiseCase{255}, ElementwiseCase{257},
                                                 ElementwiseCase{4096}, ElementwiseCase{(1 << 20) + 3});
INSTANTIATE_TEST_SUITE_P(Sizes, GeluTest, kElementwiseSizes);
INSTANTIATE_TEST_SUITE_P(Sizes, ResidualTest, kElementwiseSizes);

// ================================================================ attention

struct AttentionCase {
  int64_t B, T, NH, HS;
  std::string name() const { return cat("B", B, "_T", T, "_NH", NH, "_HS", HS); }
};

class AttentionTest : public OpTest<AttentionCase> {};

TEST_P(AttentionTest, ForwardAndBackwardMatchCpu) {
  const AttentionCase p = GetParam();
  const int64_t C = p.NH * p.HS;
  const int nh = static_cast<int>(p.NH);
  const Tolerance tol = tolerance_for(DType::F32, p.T * p.HS);
  const Tensor qkv = random_normal({p.B, p.T, 3 * C}, rng_);

  const Tensor out = Tensor::empty({p.B, p.T, C}, DType::F32);
  const Tensor att = Tensor::empty({p.B, p.NH, p.T, p.T}, DType::F32);
  ops::attention_forward(out, att, qkv, nh);
  const Tensor out_gpu = poisoned({p.B, p.T, C}, kGpu);
  const Tensor att_gpu = poisoned({p.B, p.NH, p.T, p.T}, kGpu);  // the zeros above the diagonal must be written
  ops::attention_forward(out_gpu, att_gpu, on_gpu(qkv), nh);
  EXPECT_TRUE(all_close("attention probabilities", att_gpu, att, tol));
  EXPECT_TRUE(all_close("attention out", out_gpu, out, tol));

  // Both backwards read the CPU probabilities: identical inputs.
  const Tensor dout = random_normal({p.B, p.T, C}, rng_);
  const Tensor dqkv = random_normal({p.B, p.T, 3 * C}, rng_);
  const Tensor dqkv_gpu = on_gpu(dqkv);
  ops::attention_backward(dqkv, dout, qkv, att, nh);
  ops::attention_backward(dqkv_gpu, on_gpu(dout), on_gpu(qkv), on_gpu(att), nh);
  EXPECT_TRUE(all_close("attention dqkv", dqkv_gpu, dqkv, tol));
}

// GradWrite::Overwrite: dqkv written over a buffer of NaNs, which neither side may read (the products into it run
// with beta = 0); the reference is the CPU's dqkv accumulated from zeros.
TEST_P(AttentionTest, BackwardWritesDqkvOverWithoutReadingIt) {
  const AttentionCase p = GetParam();
  const int64_t C = p.NH * p.HS;
  const int nh = static_cast<int>(p.NH);
  const Tolerance tol = tolerance_for(DType::F32, p.T * p.HS);
  const Tensor qkv = random_normal({p.B, p.T, 3 * C}, rng_);
  const Tensor att = Tensor::empty({p.B, p.NH, p.T, p.T}, DType::F32);
  ops::attention_forward(Tensor::empty({p.B, p.T, C}, DType::F32), att, qkv, nh);
  const Tensor dout = random_normal({p.B, p.T, C}, rng_);
  const Tensor from_zeros = Tensor::zeros({p.B, p.T, 3 * C}, DType::F32);
  ops::attention_backward(from_zeros, dout, qkv, att, nh);
  const Tensor dqkv = poisoned({p.B, p.T, 3 * C}, Device::cpu()), dqkv_gpu = poisoned({p.B, p.T, 3 * C}, kGpu);
  ops::attention_backward(dqkv, dout, qkv, att, nh, ops::GradWrite::Overwrite);
  ops::attention_backward(dqkv_gpu, on_gpu(dout), on_gpu(qkv), on_gpu(att), nh, ops::GradWrite::Overwrite);
  EXPECT_TRUE(all_close("attention dqkv (written over, CPU)", dqkv, from_zeros, tol));
  EXPECT_TRUE(all_close("attention dqkv (written over)", dqkv_gpu, from_zeros, tol));
}

// Scores around +1024: channel 0 of every head's q and k holds 64, the other channels N(0, 1), so each
// score is 64 * 64 / sqrt(16) = 1024 plus a N(0, 1)-sized term. exp(1024) overflows float: only a softmax that
// subtracts the row's maximum first gets finite probabilities.
TEST_P(AttentionTest, ScoresFarFromZeroMatchCpu) {
  AttentionCase p = GetParam();
  p.HS = 16;
  const int64_t C = p.NH * p.HS;
  const int nh = static_cast<int>(p.NH);
  const float big = 64.0f;
  const double offset = big * big / 4.0;  // scale 1/sqrt(16)
  std::vector<float> values = random_normal({p.B, p.T, 3 * C}, rng_).to_floats();
  for (int64_t bt = 0; bt < p.B * p.T; ++bt)
    for (int64_t h = 0; h < p.NH; ++h)
      for (const int64_t part : {int64_t{0}, C}) values[static_cast<size_t>(bt * 3 * C + part + h * p.HS)] = big;
  const Tensor qkv = Tensor::from_floats(values, {p.B, p.T, 3 * C});
  const Tolerance tol = tolerance_for_offset(DType::F32, p.T * p.HS, offset);

  const Tensor out = Tensor::empty({p.B, p.T, C}, DType::F32);
  const Tensor att = Tensor::empty({p.B, p.NH, p.T, p.T}, DType::F32);
  ops::attention_forward(out, att, qkv, nh);
  const Tensor out_gpu = poisoned({p.B, p.T, C}, kGpu);
  const Tensor att_gpu = poisoned({p.B, p.NH, p.T, p.T}, kGpu);
  ops::attention_forward(out_gpu, att_gpu, on_gpu(qkv), nh);
  EXPECT_TRUE(all_close("attention probabilities (offset scores)", att_gpu, att, tol));
  EXPECT_TRUE(all_close("attention out (offset scores)", out_gpu, out, tol));

  const Tensor dout = random_normal({p.B, p.T, C}, rng_);
  const Tensor dqkv = random_normal({p.B, p.T, 3 * C}, rng_);
  const Tensor dqkv_gpu = on_gpu(dqkv);
  ops::attention_backward(dqkv, dout, qkv, att, nh);
  ops::attention_backward(dqkv_gpu, on_gpu(dout), on_gpu(qkv), on_gpu(att), nh);
  EXPECT_TRUE(all_close("attention dqkv (offset scores)", dqkv_gpu, dqkv, tol));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(AttentionCase{1, 1, 1, 1}, AttentionCase{2, 7, 3, 5},
                                           AttentionCase{3, 33, 2, 8}, AttentionCase{2, 64, 4, 16},
                                           AttentionCase{1, 129, 12, 64}));

// ================================================================ fused classifier

struct ClassifierCase {
  int64_t N, V, Vp;
  std::string name() const { return cat("N", N, "_V", V, "_Vp", Vp); }
};

class ClassifierTest : public OpTest<ClassifierCase> {};

TEST_P(ClassifierTest, LossesAndGradientMatchCpu) {
  const ClassifierCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, p.V);
  // Random values in the padded columns too: the gradient must overwrite them with zeros.
  const Tensor logits = random_normal({p.N, p.Vp}, rng_, 2.0f);
  const Tensor targets = random_ids({p.N}, rng_, p.V);
  const float dloss = 1.0f / static_cast<float>(p.N);

  const Tensor logits_gpu = on_gpu(logits);
  const Tensor losses = Tensor::empty({p.N}, DType::F32);
  ops::fused_classifier(logits, losses, targets, p.V, dloss);
  const Tensor losses_gpu = poisoned({p.N}, kGpu);
  ops::fused_classifier(logits_gpu, losses_gpu, on_gpu(targets), p.V, dloss);
  EXPECT_TRUE(all_close("classifier losses", losses_gpu, losses, tol));
  EXPECT_TRUE(all_close("classifier dlogits", logits_gpu, logits, tol));
  const std::vector<float> grad = logits_gpu.to_floats();
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t v = p.V; v < p.Vp; ++v) ASSERT_EQ(grad[n * p.Vp + v], 0.0f) << "padded column " << v << ", row " << n;
}

// Logits around +1000 (as an untrained or diverging model can produce): exp(1000) overflows float, so only a
// kernel that subtracts the row's maximum gets finite losses and gradients. x - max is exact for floats this
// close together, so the usual tolerance applies.
TEST_P(ClassifierTest, LogitsFarFromZeroMatchCpu) {
  const ClassifierCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, p.V);
  std::vector<float> values = random_normal({p.N, p.Vp}, rng_, 2.0f).to_floats();
  for (float& v : values) v += 1000.0f;
  const Tensor logits = Tensor::from_floats(values, {p.N, p.Vp});
  const Tensor targets = random_ids({p.N}, rng_, p.V);
  const float dloss = 1.0f / static_cast<float>(p.N);
  const Tensor logits_gpu = on_gpu(logits);
  const Tensor losses = Tensor::empty({p.N}, DType::F32);
  ops::fused_classifier(logits, losses, targets, p.V, dloss);
  const Tensor losses_gpu = poisoned({p.N}, kGpu);
  ops::fused_classifier(logits_gpu, losses_gpu, on_gpu(targets), p.V, dloss);
  EXPECT_TRUE(all_close("classifier losses (logits near 1000)", losses_gpu, losses, tol));
  EXPECT_TRUE(all_close("classifier dlogits (logits near 1000)", logits_gpu, logits, tol));
}

TEST_P(ClassifierTest, ZeroDlossLeavesLogitsUntouched) {
  const ClassifierCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, p.V);
  const Tensor logits = random_normal({p.N, p.Vp}, rng_, 2.0f);
  const Tensor targets = random_ids({p.N}, rng_, p.V);
  const Tensor logits_gpu = on_gpu(logits);
  const Tensor losses = Tensor::empty({p.N}, DType::F32);
  ops::fused_classifier(logits.clone(), losses, targets, p.V, 0.0f);
  const Tensor losses_gpu = poisoned({p.N}, kGpu);
  ops::fused_classifier(logits_gpu, losses_gpu, on_gpu(targets), p.V, 0.0f);
  EXPECT_TRUE(all_close("classifier losses (no gradient)", losses_gpu, losses, tol));
  EXPECT_EQ(logits_gpu.to_floats(), logits.to_floats());
}

INSTANTIATE_TEST_SUITE_P(Shapes, ClassifierTest,
                         ::testing::Values(ClassifierCase{1, 1, 1}, ClassifierCase{3, 10, 16},
                                           ClassifierCase{5, 1000, 1024}, ClassifierCase{2, 513, 640},
                                           ClassifierCase{7, 50257, 50304}));

TEST(ClassifierGpu, OutOfRangeTargetGivesNanLoss) {
  LAB_REQUIRE_GPU();
  Rng rng(11);
  const int64_t N = 3, V = 10, Vp = 16;
  const Tensor logits = on_gpu(random_normal({N, Vp}, rng));
  const Tensor targets = Tensor::from_ints(std::vector<int32_t>{2, static_cast<int32_t>(V), -1}, {N}, kGpu);
  const Tensor losses = poisoned({N}, kGpu);
  ops::fused_classifier(logits, losses, targets, V, 1.0f / N);
  const std::vector<float> l = losses.to_floats();
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_TRUE(std::isnan(l[2]));
}

// ================================================================ AdamW

struct AdamWCase {
  int64_t n;
  int64_t step;
  float weight_decay;
  std::string name() const { return cat("n", n, "_step", step, weight_decay > 0 ? "_wd" : "_nowd"); }
};

class AdamWTest : public OpTest<AdamWCase> {};

TEST_P(AdamWTest, UpdateMatchesCpu) {
  const AdamWCase p = GetParam();
  const Tolerance tol = tolerance_for(DType::F32, 1);
  const Tensor params = random_normal({p.n}, rng_), grads = random_normal({p.n}, rng_);
  const Tensor m = random_normal({p.n}, rng_, 0.1f);
  std::vector<float> vs = random_normal({p.n}, rng_, 0.1f).to_floats();
  for (float& x : vs) x = x * x;  // second moments are non-negative
  const Tensor v = Tensor::from_floats(vs, {p.n});
  const Tensor params_gpu = on_gpu(params), m_gpu = on_gpu(m), v_gpu = on_gpu(v);
  ops::AdamWHyper hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = p.weight_decay;
  hyper.step = p.step;
  const float grad_scale = 0.5f;
  ops::adamw_update(params, grads, m, v, hyper, grad_scale);
  ops::adamw_update(params_gpu, on_gpu(grads), m_gpu, v_gpu, hyper, grad_scale);
  EXPECT_TRUE(all_close("adamw params", params_gpu, params, tol));
  EXPECT_TRUE(all_close("adamw m", m_gpu, m, tol));
  EXPECT_TRUE(all_close("adamw v", v_gpu, v, tol));
}

INSTANTIATE_TEST_SUITE_P(Sizes, AdamWTest,
                         ::testing::Values(AdamWCase{1, 1, 0.0f}, AdamWCase{1000, 1, 0.1f}, AdamWCase{257, 7, 0.1f},
                                           AdamWCase{(1 << 20) + 7, 3, 0.0f}));

// ================================================================ reductions

class ReduceTest : public OpTest<ElementwiseCase> {};

TEST_P(ReduceTest, SumAndSumOfSquaresMatchCpu) {
  const int64_t n = GetParam().n;
  const Tensor x = random_normal({n}, rng_);
  const Tensor x_gpu = on_gpu(x);
  double sum_abs = 0.0;
  for (const float v : x.to_floats()) sum_abs += std::fabs(v);
  // Judged against the sum of magnitudes: a sum of random signs can cancel to near zero.
  const double tol = tolerance_for(DType::F32, n).rel;
  EXPECT_NEAR(ops::sum(x_gpu), ops::sum(x), tol * sum_abs);
  const double squares = ops::sum_squares(x);
  EXPECT_NEAR(ops::sum_squares(x_gpu), squares, tol * squares);
}

// The reductions that stay on the device for the steps whose gradients are split across ranks: each partial sum
// of squares added into an f32 total (in double, as sum_squares adds its blocks), and the norm and the update's
// scale from that total in the host's double arithmetic, bit for bit.
TEST_P(ReduceTest, SumsOfSquaresAddUpOnTheDeviceAndGiveTheHostsNormAndScale) {
  const int64_t n = GetParam().n;
  const Tensor x_gpu = on_gpu(random_normal({n}, rng_)), y_gpu = on_gpu(random_normal({n + 3}, rng_));
  const Tensor total = Tensor::zeros({1}, DType::F32, kGpu);
  ops::accumulate_sum_squares(total, x_gpu);
  const auto after_x = static_cast<float>(ops::sum_squares(x_gpu));
  EXPECT_EQ(total.to_floats()[0], after_x);
  ops::accumulate_sum_squares(total, y_gpu);
  const auto both = static_cast<float>(static_cast<double>(after_x) + ops::sum_squares(y_gpu));
  EXPECT_EQ(total.to_floats()[0], both);
  for (const double max_norm : {0.0, 1.0, 1e9}) {
    const double loss_scale = 4.0;
    const Tensor out = Tensor::zeros({2}, DType::F32, kGpu);
    ops::norm_and_scale(out, total, max_norm, loss_scale);
    const double norm = std::sqrt(static_cast<double>(both)) / loss_scale;
    EXPECT_EQ(out.to_floats()[0], static_cast<float>(norm)) << max_norm;
    EXPECT_EQ(out.to_floats()[1], ops::clip_scale(norm, max_norm, loss_scale)) << max_norm;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ReduceTest,
                         ::testing::Values(ElementwiseCase{1}, ElementwiseCase{1000}, ElementwiseCase{262143},
                                           ElementwiseCase{(1 << 22) + 5}));

TEST(ReduceGpu, EmptyTensorSumsToZero) {
  LAB_REQUIRE_GPU();
  const Tensor empty = Tensor::empty({0}, DType::F32, kGpu);
  EXPECT_EQ(ops::sum(empty), 0.0);
  EXPECT_EQ(ops::sum_squares(empty), 0.0);
}

}  // namespace
}  // namespace lab
