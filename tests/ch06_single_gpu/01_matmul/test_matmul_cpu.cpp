// Lab 01 (matmul) on the CPU: the lab's CPU versions against the CPU reference GEMM at odd shapes (off the
// blocked loop's 64-row, 256-deep, 512-column blocks; tiny; with A far from zero); the reference GEMM itself
// against an fp64 product; ch06::matmul_bias_gelu's CPU path against fp64; bad arguments; the lab
// executable's command line. Label ch06.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ch06_single_gpu/kernels/01_matmul/matmul_lab.h"
#include "ch06_single_gpu/kernels/01_matmul/matmul_versions.h"
#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/lab/compare.h"
#include "common/util/rng.h"
#include "tests/ch06_single_gpu/01_matmul/matmul_op_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

// ================================================================ the lab's CPU versions

struct LabCase {
  int64_t M, N, K;
  float offset;
};

void PrintTo(const LabCase& c, std::ostream* os) {
  *os << "M" << c.M << "_N" << c.N << "_K" << c.K << (c.offset != 0.0f ? "_far" : "");
}

const LabCase kLabCases[] = {{1, 1, 1, 0},      {2, 3, 5, 0},      {7, 33, 9, 0},
                             {65, 513, 257, 0}, {64, 512, 256, 0}, {33, 31, 300, 100.0f}};

class MatmulLabCpu : public ::testing::TestWithParam<LabCase> {};

TEST_P(MatmulLabCpu, EveryCpuVersionMatchesTheReference) {
  const LabCase c = GetParam();
  const kernel_lab::KernelLab lab = ch06::make_matmul_lab({c.M, c.N, c.K, c.offset, 7});
  const std::vector<int> cpu = test::versions_on(lab, DeviceType::CPU);
  ASSERT_GE(cpu.size(), 5u);
  for (const int v : cpu) EXPECT_TRUE(test::version_passes(lab, v));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulLabCpu, ::testing::ValuesIn(kLabCases));

// Above 1 GFLOP a run the naive loop is left out, unless asked for: it keeps its number and says why, and is
// neither validated nor timed (at the default shape one run of it takes 15 s to a minute on 2 cores).
TEST(MatmulLabCpu, TheNaiveLoopIsLeftOutAboveItsBudgetUnlessAskedFor) {
  ch06::MatmulProblem p;  // the default shape, 19.3 GFLOP
  EXPECT_FALSE(ch06::runs_cpu_naive(p));
  p.cpu_naive_at_any_size = true;
  EXPECT_TRUE(ch06::runs_cpu_naive(p));
  EXPECT_TRUE(ch06::runs_cpu_naive({512, 768, 768}));  // 0.6 GFLOP

  const kernel_lab::KernelLab lab = ch06::make_matmul_lab({800, 800, 800, 0.0f, 7});  // 1.02 GFLOP
  const int naive = test::versions_on(lab, DeviceType::CPU).front();
  const kernel_lab::Version& v = lab.versions()[static_cast<size_t>(naive - 1)];
  EXPECT_EQ(v.name, "CPU naive");
  EXPECT_NE(v.left_out.find("1.02 GFLOP a run, above the 1 GFLOP"), std::string::npos) << v.left_out;
  EXPECT_NE(v.left_out.find("--cpu-naive"), std::string::npos) << v.left_out;
  const std::vector<kernel_lab::VersionReport> r =
      lab.measure({.warmup = 0, .repeats = 1, .only = {naive, naive + 1}, .cpu_ceiling = false});
  EXPECT_FALSE(r[0].timed);
  EXPECT_EQ(r[0].left_out, v.left_out);
  EXPECT_TRUE(r[1].timed);  // the blocked loop still runs
  const kernel_lab::KernelLab forced = ch06::make_matmul_lab({800, 800, 800, 0.0f, 7, true});  // --cpu-naive
  EXPECT_TRUE(forced.versions()[static_cast<size_t>(naive - 1)].left_out.empty());
}

// The CPU reference GEMM is what the fp32 versions are judged against (and the OpenBLAS version is that
// GEMM): it is itself judged against an fp64 product here.
TEST(MatmulCpu, TheReferenceGemmMatchesAnFp64Product) {
  const int64_t M = 37, N = 70, K = 515;
  Rng rng(3);
  std::vector<float> a(M * K), b(K * N);
  for (float& v : a) v = rng.normal();
  for (float& v : b) v = rng.normal();
  std::vector<float> exact(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(a[i * K + k]) * b[k * N + j];
      exact[i * N + j] = static_cast<float>(sum);
    }
  const Tensor c = Tensor::empty({M, N}, DType::F32);
  ch06::matmul::cpu_openblas(c, Tensor::from_floats(a, {M, K}), Tensor::from_floats(b, {K, N}));
  const CloseReport r = compare_close(c, Tensor::from_floats(exact, {M, N}), tolerance_for(DType::F32, K));
  EXPECT_TRUE(r.ok()) << r.describe("c");
}

// ================================================================ the op on the CPU

class MatmulBiasGeluCpu : public ::testing::TestWithParam<test::MatmulOpCase> {};

TEST_P(MatmulBiasGeluCpu, MatchesFp64) {
  test::check_matmul_op_case(GetParam(), Device::cpu(), 11);
}

TEST_P(MatmulBiasGeluCpu, GeluGradientEpilogueMatchesFp64) {
  test::check_gelu_grad_case(GetParam(), Device::cpu(), 12);
}

INSTANTIATE_TEST_SUITE_P(Cases, MatmulBiasGeluCpu, ::testing::ValuesIn(test::matmul_op_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(MatmulBiasGeluCpu, BadArgumentsAreClearErrors) {
  using testing::expect_error;
  const Tensor inp = Tensor::zeros({4, 8}, DType::F32), weight = Tensor::zeros({6, 8}, DType::F32);
  const Tensor bias = Tensor::zeros({6}, DType::F32), out = Tensor::zeros({4, 6}, DType::F32);
  expect_error([&] { ch06::matmul_bias_gelu(out, {}, inp, Tensor::zeros({48}, DType::F32), bias); },
               ErrorKind::InvalidArgument, {"weight"});
  expect_error(
      [&] {
        ch06::matmul_bias_gelu(out, {}, Tensor::zeros({4, 7}, DType::F32), weight, bias);
      },
      ErrorKind::InvalidArgument, {"input [4, 7]", "weight [6, 8]"});
  expect_error(
      [&] {
        ch06::matmul_bias_gelu(Tensor::zeros({4, 5}, DType::F32), {}, inp, weight, bias);
      },
      ErrorKind::InvalidArgument, {"output [4, 5]", "[4, 6]"});
  expect_error(
      [&] {
        ch06::matmul_bias_gelu(out, Tensor::zeros({6, 4}, DType::F32), inp, weight, bias);
      },
      ErrorKind::InvalidArgument, {"pre_gelu [6, 4]"});
  expect_error([&] { ch06::matmul_bias_gelu(out, {}, inp, weight, Tensor::zeros({5}, DType::F32)); },
               ErrorKind::InvalidArgument, {"bias"});
  expect_error([&] { ch06::matmul_bias_gelu(out, {}, inp, weight.to_dtype(DType::BF16), bias); },
               ErrorKind::InvalidArgument, {"b (a's dtype)"});
  expect_error([&] { ch06::matmul_bias_gelu(out.to_dtype(DType::BF16), {}, inp, weight, bias); },
               ErrorKind::InvalidArgument, {"out is bf16 for f32 inputs"});
  expect_error(
      [&] {
        ch06::matmul_bias_gelu(out, {}, Tensor::zeros({4, 8}, DType::I32), Tensor::zeros({6, 8}, DType::I32), bias);
      },
      ErrorKind::InvalidArgument, {"f32, bf16 or f16 inputs"});
  expect_error([&] { ch06::matmul_epilogue(out, {}, inp, weight, true, bias, ch06::Epilogue::None); },
               ErrorKind::InvalidArgument, {"none epilogue takes no bias"});
  expect_error([&] { ch06::matmul_epilogue(out, {}, inp, weight, true, {}, ch06::Epilogue::BiasGelu); },
               ErrorKind::InvalidArgument, {"bias+gelu epilogue needs a bias"});
  expect_error([&] { ch06::matmul_epilogue(out, out.clone(), inp, weight, true, bias, ch06::Epilogue::Bias); },
               ErrorKind::InvalidArgument, {"pre_gelu is only used by the GELU epilogues"});
  const Tensor a = Tensor::zeros({4, 6}, DType::F32);  // a GELU's output gradient [4, 6] @ weight [6, 8]
  const Tensor dpre = Tensor::zeros({4, 8}, DType::F32);
  expect_error([&] { ch06::matmul_epilogue(dpre, {}, a, weight, false, {}, ch06::Epilogue::GeluGrad); },
               ErrorKind::InvalidArgument, {"dgelu epilogue reads GELU's input, pre_gelu, which is missing"});
  expect_error(
      [&] {
        ch06::matmul_epilogue(dpre, dpre.clone(), a, weight, false, Tensor::zeros({8}, DType::F32),
                              ch06::Epilogue::GeluGrad);
      },
      ErrorKind::InvalidArgument, {"dgelu epilogue takes no bias"});
  expect_error([&] { ch06::matmul_epilogue(out, {}, inp, weight, false, bias, ch06::Epilogue::Bias); },
               ErrorKind::InvalidArgument, {"matmul_epilogue b"});
}

TEST(MatmulVersionsCpu, MismatchedShapesAreClearErrors) {
  const Tensor a = Tensor::zeros({4, 8}, DType::F32), b = Tensor::zeros({7, 5}, DType::F32);
  testing::expect_error(
      [&] {
        ch06::matmul::cpu_naive(Tensor::zeros({4, 5}, DType::F32), a, b);
      },
      ErrorKind::InvalidArgument, {"matmul CPU naive", "shapes do not agree"});
}

// ================================================================ the lab executable

// Runs ch06_matmul_lab with `args`; returns its exit status and what it printed.
int run_lab(const std::string& args, std::string* output) {
  const std::string log = testing::scratch_directory() + "/out.txt";
  const int status =
      std::system((std::string(LAB_BINARY_DIR) + "/bin/ch06_matmul_lab " + args + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  *output = text.str();
  return WEXITSTATUS(status);
}

TEST(MatmulLabProgram, ValidatesEveryVersionAtASmallShape) {
  std::string output;
  EXPECT_EQ(run_lab("--m 19 --n 21 --k 23 --validate-only", &output), 0) << output;
  EXPECT_NE(output.find("CPU fused bias + GELU by row blocks: ok"), std::string::npos) << output;
  EXPECT_EQ(output.find("FAILED"), std::string::npos) << output;
}

TEST(MatmulLabProgram, TheHelpNamesTheFlagThatRunsTheNaiveLoop) {
  std::string output;
  EXPECT_EQ(run_lab("--help", &output), 0);
  EXPECT_NE(output.find("--cpu-naive"), std::string::npos) << output;
  EXPECT_NE(output.find("left out above 1 GFLOP a run"), std::string::npos) << output;
}

TEST(MatmulLabProgram, BadFlagsAreOneClearError) {
  std::string output;
  EXPECT_EQ(run_lab("--m 0", &output), 1);
  EXPECT_NE(output.find("error: "), std::string::npos) << output;
  EXPECT_NE(output.find("--m"), std::string::npos) << output;
  EXPECT_EQ(run_lab("--version 99 --m 4 --n 4 --k 4", &output), 1);
  EXPECT_NE(output.find("error: "), std::string::npos) << output;
  EXPECT_EQ(run_lab("--flops 3", &output), 1);
  EXPECT_NE(output.find("--flops"), std::string::npos) << output;
}

}  // namespace
}  // namespace lab
