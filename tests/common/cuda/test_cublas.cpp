// cuBLAS handles, their workspaces and the TF32 switch: the handle follows the current stream, a stream's
// workspace is shared by threads and freed with the stream, and the switch changes both the math mode and
// the numbers a GEMM produces.
#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/cuda/cublas.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#include "common/ops/linear.h"
#include "common/train/math_mode.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab {
namespace {

using test::kGpu;

// Sets the TF32 switch for a scope and restores it, so a failing test leaves strict fp32 behind.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool enabled) : saved_(cuda::tf32_enabled()) { cuda::set_tf32(enabled); }
  ~Tf32Scope() { cuda::set_tf32(saved_); }

 private:
  bool saved_;
};

TEST(CudaBlas, HandleFollowsTheCurrentStream) {
  LAB_REQUIRE_GPU();
  cudaStream_t bound = nullptr;
  ASSERT_EQ(cublasGetStream(cuda::cublas_handle(), &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, cuda::current_stream());
  cuda::Stream side;
  {
    cuda::StreamGuard guard(side);
    ASSERT_EQ(cublasGetStream(cuda::cublas_handle(), &bound), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(bound, side.get());
    const cuda::BlasWorkspace workspace = cuda::blas_workspace();
    EXPECT_NE(workspace.data, nullptr);
    EXPECT_GE(workspace.bytes, size_t{1} << 20);
  }
  EXPECT_NE(cuda::cublaslt_handle(), nullptr);
}

int64_t live_workspace_bytes() {
  return memory_stats(kGpu).live_of(MemCategory::Workspace);
}

TEST(CudaBlas, WorkspaceOfADestroyedStreamIsFreed) {
  LAB_REQUIRE_GPU();
  const int64_t before = live_workspace_bytes();
  {
    cuda::Stream side;
    cuda::StreamGuard guard(side);
    ASSERT_NE(cuda::cublas_handle(), nullptr);
    EXPECT_GT(live_workspace_bytes(), before) << "the side stream got a workspace of its own";
  }
  EXPECT_EQ(live_workspace_bytes(), before) << "the workspace outlived its stream";
}

TEST(CudaBlas, ThreadsShareTheWorkspaceOfAStream) {
  LAB_REQUIRE_GPU();
  cuda::Stream side;
  cuda::StreamGuard guard(side);
  const void* mine = cuda::blas_workspace().data;
  const int64_t live = live_workspace_bytes();
  const void* theirs = nullptr;
  std::thread other([&] {
    cuda::StreamGuard on(side);
    ASSERT_NE(cuda::cublas_handle(), nullptr);
    theirs = cuda::blas_workspace().data;
  });
  other.join();
  EXPECT_EQ(theirs, mine);
  EXPECT_EQ(live_workspace_bytes(), live) << "a second thread on the same stream allocated another workspace";
}

// tf32 switches TF32 on; so do bf16 and fp16, for the fp32 products they leave (the materialized attention's); fp32
// switches it off again (it outlives a run).
TEST(CudaBlas, EachMathModeSetsTheTf32Switch) {
  LAB_REQUIRE_GPU();
  Tf32Scope restore(false);
  for (const auto& [mode, tf32] :
       {std::pair{MathMode::BF16, true}, std::pair{MathMode::FP32, false}, std::pair{MathMode::FP16, true},
        std::pair{MathMode::TF32, true}, std::pair{MathMode::FP32, false}}) {
    apply_math_mode(kGpu, mode);
    EXPECT_EQ(cuda::tf32_enabled(), tf32) << bench::precision_name(mode);
  }
}

TEST(CudaBlas, Tf32SwitchSetsTheMathMode) {
  LAB_REQUIRE_GPU();
  cublasMath_t mode{};
  {
    Tf32Scope tf32(true);
    EXPECT_TRUE(cuda::tf32_enabled());
    ASSERT_EQ(cublasGetMathMode(cuda::cublas_handle(), &mode), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(mode, CUBLAS_TF32_TENSOR_OP_MATH);
    EXPECT_EQ(cuda::fp32_compute_type(), CUBLAS_COMPUTE_32F_FAST_TF32);
  }
  Tf32Scope strict(false);
  EXPECT_FALSE(cuda::tf32_enabled());
  ASSERT_EQ(cublasGetMathMode(cuda::cublas_handle(), &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  EXPECT_EQ(cuda::fp32_compute_type(), CUBLAS_COMPUTE_32F);
}

// 1 + 2^-11 needs 11 mantissa bits: fp32 keeps it, TF32 (10 bits) does not. Every partial sum of 512 such
// products is j + j * 2^-11 for an integer j <= 512, exactly representable in fp32, so strict fp32 gives
// exactly 512.25 whatever order cuBLAS sums in; with TF32 inputs the sum is 512 (or 512.5 if the
// hardware rounds the halfway case up), never 512.25.
// The same with a bias of 0.25 (the linear layer's bias epilogue): 512.5 strict, 512.25 or 512.75 with TF32.
TEST(CudaBlas, Tf32ChangesTheResultOfAGemm) {
  LAB_REQUIRE_GPU();
  const int64_t n = 512;
  const float x = 1.0f + 0x1p-11f;
  const Tensor inp = Tensor::from_floats(std::vector<float>(n * n, x), {n, n}, kGpu);
  const Tensor weight = Tensor::from_floats(std::vector<float>(n * n, 1.0f), {n, n}, kGpu);
  const Tensor bias = Tensor::from_floats(std::vector<float>(n, 0.25f), {n}, kGpu);
  const Tensor out = Tensor::empty({n, n}, DType::F32, kGpu);
  {
    Tf32Scope strict(false);
    ops::linear_forward(out, inp, weight, Tensor());
    for (const float v : out.to_floats()) ASSERT_EQ(v, 512.25f) << "strict fp32 must be exact here";
    ops::linear_forward(out, inp, weight, bias);
    for (const float v : out.to_floats()) ASSERT_EQ(v, 512.5f) << "strict fp32 with the bias must be exact here";
  }
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "TF32 tensor cores need compute capability 8.0 or newer";
  Tf32Scope tf32(true);
  ops::linear_forward(out, inp, weight, Tensor());
  for (const float v : out.to_floats()) ASSERT_NE(v, 512.25f) << "the GEMM did not run with TF32 inputs";
  ops::linear_forward(out, inp, weight, bias);
  for (const float v : out.to_floats()) {
    ASSERT_NE(v, 512.5f) << "the GEMM with the bias did not run with TF32 inputs";
    ASSERT_TRUE(v == 512.25f || v == 512.75f) << v << ": the TF32 sum (512 or 512.5) plus the bias";
  }
}

}  // namespace
}  // namespace lab
