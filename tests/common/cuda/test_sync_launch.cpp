// LAB_CUDA_SYNC_LAUNCH=1 (common/cuda/check.h): every launch waits for its kernel, so a fault raised while a
// kernel runs is reported at that kernel's launch, by name; without it the fault surfaces at the next
// synchronising call, which cannot know which kernel raised it.
//
// A fault leaves the device's error sticky for the rest of the process, and the switch is read once per
// process, so each case runs in a child process: a death test in gtest's "threadsafe" style re-executes this
// program, which then reads the environment afresh. The faulting kernel misuses a barrier, which only the
// emulation build detects, so on a real GPU these tests skip.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "common/core/error.h"
#include "common/core/tensor.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#include "tests/common/cuda/faulty_kernel.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/cuda/stream_gate.h"

namespace lab {
namespace {

using test::kGpu;

constexpr int kReportedAtLaunch = 3, kReportedAtSynchronize = 4, kNotReported = 5;

// In the child: launches the faulting kernel on a stream held by a gate when `gated` (so that the launch
// returns before the kernel runs, as it usually does on a GPU), then releases the gate and synchronises; exits
// with the code of the call that reported the fault, after printing its message.
[[noreturn]] void launch_then_synchronize(bool gated) {
  const Tensor out = Tensor::zeros({64}, DType::F32, kGpu);
  test::load_barrier_misuse();  // loaded before the gate holds the stream (faulty_kernel.h)
  cuda::synchronize();
  cuda::Stream side;
  test::StreamGate gate(side);
  if (!gated) gate.release();
  try {
    cuda::StreamGuard on(side);
    test::launch_barrier_misuse(out);
  } catch (const Error& e) {
    std::fprintf(stderr, "at launch: %s\n", e.what());
    std::exit(kReportedAtLaunch);
  }
  gate.release();
  try {
    cuda::synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "at synchronize: %s\n", e.what());
    std::exit(kReportedAtSynchronize);
  }
  std::exit(kNotReported);
}

class CudaSyncLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
#ifndef LAB_CUDA_EMULATION
    GTEST_SKIP() << "the fault used here (a barrier not reached by every thread) is detected only by the emulator";
#endif
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
  void TearDown() override {
    unsetenv("LAB_CUDA_SYNC_LAUNCH");
  }
};

// The launch waits for the kernel (which is still running when the launch is checked), so its own launch
// reports the fault, by name.
TEST_F(CudaSyncLaunch, FaultIsReportedAtTheLaunchOfItsKernel) {
  setenv("LAB_CUDA_SYNC_LAUNCH", "1", 1);
  EXPECT_EXIT(launch_then_synchronize(false), ::testing::ExitedWithCode(kReportedAtLaunch),
              "at launch: CUDA error: .* raised by kernel barrier_misuse_kernel \\(LAB_CUDA_SYNC_LAUNCH=1\\)");
}

// Without the switch the launch returns before the kernel runs, and the fault surfaces at a later call that
// cannot tell which kernel raised it.
TEST_F(CudaSyncLaunch, WithoutTheSwitchTheFaultSurfacesLater) {
  unsetenv("LAB_CUDA_SYNC_LAUNCH");
  EXPECT_EXIT(launch_then_synchronize(true), ::testing::ExitedWithCode(kReportedAtSynchronize),
              "at synchronize: CUDA error: .*cudaDeviceSynchronize");
}

}  // namespace
}  // namespace lab
